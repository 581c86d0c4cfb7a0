package natsserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures the in-process NATS server of `jobgate serve`.
type EmbeddedConfig struct {
	// StoreDir holds JetStream's file storage.
	StoreDir string
	// Listen, when set (host:port), also accepts NATS clients there, e.g.
	// event subscribers. Empty keeps the server reachable in-process only.
	Listen string
	// SyncAlways fsyncs every write before acknowledging it. Off, JetStream
	// syncs every SyncInterval (default 2m) and an OS crash can lose
	// acknowledged writes.
	SyncAlways bool
	// MaxStore is the JetStream file storage the server grants, which must
	// hold the layout's byte budgets (natsjs.Layout.StorageReserve); zero
	// grants natsjs.DefaultLayout's. Left to itself a server grants 75% of
	// the disk space free when it starts, and refuses budgets past that.
	// The server grants EmbeddedHeadroom more. StartEmbedded refuses a
	// MaxStore larger than the disk's free space plus what the store holds.
	MaxStore int64
	// Configure, if set, may adjust the server options before start (the
	// notifier's tenant users, tests).
	Configure func(*server.Options) error
}

// EmbeddedHeadroom is the storage an embedded server grants beyond the
// layout's budgets, for streams jobgate does not provision (the bench's
// raw pipeline, an operator's own): with every byte reserved, NATS refuses
// even a stream without a byte limit, which it counts as one byte more.
const EmbeddedHeadroom = 1 << 30

// Embedded is a running in-process NATS server with JetStream.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts the server and waits until it accepts connections.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded nats: store dir required")
	}
	opts := &server.Options{
		ServerName:         "jobgate",
		JetStream:          true,
		StoreDir:           cfg.StoreDir,
		SyncAlways:         cfg.SyncAlways,
		DontListen:         true,
		NoSigs:             true,
		NoLog:              true,
		MaxPayload:         8 << 20,
		JetStreamMaxMemory: 256 << 20,
		JetStreamMaxStore:  cfg.MaxStore,
	}
	if opts.JetStreamMaxStore == 0 {
		opts.JetStreamMaxStore = natsjs.DefaultLayout().StorageReserve()
	}
	if err := checkDisk(cfg.StoreDir, opts.JetStreamMaxStore); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	opts.JetStreamMaxStore += EmbeddedHeadroom
	if cfg.Listen != "" {
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: listen %q: %w", cfg.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: listen port %q: %w", port, err)
		}
		opts.DontListen = false
		opts.Host, opts.Port = host, p
	}
	if cfg.Configure != nil {
		if err := cfg.Configure(opts); err != nil {
			return nil, fmt.Errorf("embedded nats: %w", err)
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	// The server reports what stops it from starting (a taken --nats-listen
	// port, a JetStream store it cannot open) only through its logger's
	// Fatalf; catch that so the caller learns the cause at once instead of
	// after the readiness timeout.
	fatal := &fatalLogger{ch: make(chan string, 1)}
	s.SetLogger(fatal, false, false)
	go s.Start()
	deadline := time.Now().Add(30 * time.Second)
	for !s.ReadyForConnections(50 * time.Millisecond) {
		select {
		case msg := <-fatal.ch:
			s.Shutdown()
			return nil, fmt.Errorf("embedded nats: %s", msg)
		default:
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			return nil, errors.New("embedded nats: not ready within 30s")
		}
	}
	return &Embedded{srv: s}, nil
}

// fatalLogger is the embedded server's logger: silent (the server runs with
// NoLog), except that the first fatal message is kept for StartEmbedded.
type fatalLogger struct{ ch chan string }

func (l *fatalLogger) Fatalf(format string, v ...any) {
	select {
	case l.ch <- fmt.Sprintf(format, v...):
	default:
	}
}
func (*fatalLogger) Noticef(string, ...any) {}
func (*fatalLogger) Warnf(string, ...any)   {}
func (*fatalLogger) Errorf(string, ...any)  {}
func (*fatalLogger) Debugf(string, ...any)  {}
func (*fatalLogger) Tracef(string, ...any)  {}

// Server returns the underlying server (tests, accounts).
func (e *Embedded) Server() *server.Server { return e.srv }

// ClientURL is the listen URL, or "" when only in-process.
func (e *Embedded) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// Connect opens an in-process client connection.
func (e *Embedded) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.Name(name), nats.InProcessServer(e.srv), nats.MaxReconnects(-1)}, opts...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("connect embedded nats: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits for it to finish.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
