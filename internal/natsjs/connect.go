package natsjs

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ConnectConfig configures a connection to an external NATS deployment.
type ConnectConfig struct {
	URL       string // comma-separated server URLs
	Name      string // client name shown by the server
	CredsFile string // NATS credentials file (JWT + NKey seed)
	NKeyFile  string // NKey seed file
	User      string
	Password  string
	TLSCA     string
	TLSCert   string
	TLSKey    string
	// InboxPrefix replaces _INBOX as the prefix of reply subjects (worker
	// credentials may only subscribe under their wire.InboxPrefix).
	InboxPrefix string
	// OnAsyncError, when set, hears the connection's asynchronous errors
	// (a subscription's dropped messages, permissions).
	OnAsyncError nats.ErrHandler
}

// Connect opens a connection to an external NATS deployment that reconnects
// forever, so a node loss is a pause, not an exit.
func Connect(cfg ConnectConfig) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(cfg.Name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(true)}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	if cfg.OnAsyncError != nil {
		opts = append(opts, nats.ErrorHandler(cfg.OnAsyncError))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", cfg.URL, err)
	}
	return nc, nil
}

// NewJetStream opens the JetStream API on a connection.
func NewJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}
