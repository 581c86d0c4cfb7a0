package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// process is what every service of a process shares: settings, logger, the
// NATS connection (to an embedded or external server) and the provisioned
// JetStream resources.
type process struct {
	cfg      *config.Config
	log      *slog.Logger
	embedded *natsjs.Embedded // nil against an external NATS
	nc       *nats.Conn
	res      *natsjs.Resources
	fp       *failpoint.Set
	metrics  *metrics.Metrics
	// httpListener is the gateway's address, bound before anything else
	// started (see claimProcessResources); nil in processes without one.
	httpListener net.Listener
	// connect opens another connection like nc; ownConn keeps those it
	// opens for components (see component) in own, closed with the process.
	connect func(name string) (*nats.Conn, error)
	ownMu   sync.Mutex
	own     []*nats.Conn
}

// ownConn opens a connection of the process's own for one component.
func (rt *process) ownConn(name string) (*nats.Conn, error) {
	nc, err := rt.connect(name)
	if err != nil {
		return nil, err
	}
	rt.ownMu.Lock()
	rt.own = append(rt.own, nc)
	rt.ownMu.Unlock()
	return nc, nil
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel)))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openRuntime connects (starting the embedded server when no URL is set) and
// provisions the deployment's streams and buckets.
func openRuntime(ctx context.Context, cfg *config.Config, name string, logw io.Writer, configure ...func(*natsjs.EmbeddedConfig)) (*process, error) {
	rt := &process{cfg: cfg, log: newLogger(cfg, logw), metrics: metrics.New()}
	if name != "serve" {
		rt.log = rt.log.With("process", name)
	}
	fp, err := failpoint.Parse(cfg.Failpoints)
	if err != nil {
		return nil, &usageError{err.Error()}
	}
	rt.fp = fp
	if cfg.Embedded() {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		ec := natsjs.EmbeddedConfig{StoreDir: cfg.Path("nats"), Listen: cfg.NATS.Listen, SyncAlways: cfg.NATS.SyncAlways}
		for _, f := range configure {
			f(&ec)
		}
		rt.embedded, err = natsjs.StartEmbedded(ec)
		if err != nil {
			return nil, err
		}
		rt.connect = func(n string) (*nats.Conn, error) { return rt.embedded.Connect("jobgate-" + n) }
	} else {
		cc := natsjs.ConnectConfig{
			URL: cfg.NATS.URL, Name: "jobgate-" + name, CredsFile: cfg.NATS.CredsFile, NKeyFile: cfg.NATS.NKeyFile,
			User: cfg.NATS.User, Password: cfg.NATS.Password, TLSCA: cfg.NATS.TLSCA, TLSCert: cfg.NATS.TLSCert, TLSKey: cfg.NATS.TLSKey,
		}
		if name == "renderer" {
			// A renderer is jobgate's own worker: it may run with a
			// credential limited to its protocol subjects, whose replies
			// come under jobgate's worker inbox (docs/protocol.md).
			cc.InboxPrefix = wire.InboxPrefix(wire.JobgateCredential)
		}
		rt.connect = func(n string) (*nats.Conn, error) {
			c := cc
			c.Name = "jobgate-" + n
			return natsjs.Connect(c)
		}
	}
	rt.nc, err = rt.connect(name)
	if err != nil {
		rt.close()
		return nil, err
	}
	js, err := jetstream.New(rt.nc)
	if err != nil {
		rt.close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	layout := natsjs.DefaultLayout()
	layout.Replicas = cfg.NATS.Replicas
	layout.JobTTL = cfg.JobTTL
	layout.ResultTTL = cfg.ResultTTL
	// Provision retries what a forming cluster outgrows (no leader yet,
	// too few peers) by itself; this bounds how long it may.
	pctx, cancel := context.WithTimeout(ctx, provisionPatience)
	if name == "renderer" && !cfg.Embedded() {
		// Workers create nothing (worker credentials may not): they bind
		// to what the deployment's services provisioned, waiting for it.
		rt.res, err = natsjs.Bind(pctx, js)
	} else {
		rt.res, err = natsjs.Provision(pctx, js, layout)
	}
	cancel()
	if err != nil {
		rt.close()
		return nil, err
	}
	return rt, nil
}

// component returns the process as the named component sees it when the
// process runs several (serve): on a NATS connection of its own, so one
// component's traffic (a worker's pulls and acks, the relay's publishes)
// does not queue the gateway's admissions behind it in one connection's
// read loop, write lock and response mux. Measured in the bench's
// pipeline section (docs/performance.md).
func (rt *process) component(ctx context.Context, name string) (*process, error) {
	nc, err := rt.ownConn(name)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	bctx, cancel := context.WithTimeout(ctx, provisionPatience)
	defer cancel()
	res, err := natsjs.Rebind(bctx, js, rt.res)
	if err != nil {
		return nil, err
	}
	return &process{cfg: rt.cfg, log: rt.log, embedded: rt.embedded, nc: nc, res: res, fp: rt.fp, metrics: rt.metrics,
		httpListener: rt.httpListener, connect: rt.connect}, nil
}

func (rt *process) close() {
	rt.ownMu.Lock()
	own := rt.own
	rt.own = nil
	rt.ownMu.Unlock()
	for i := len(own) - 1; i >= 0; i-- {
		_ = own[i].Drain()
		own[i].Close()
	}
	if rt.nc != nil {
		_ = rt.nc.Drain()
		rt.nc.Close()
	}
	if rt.embedded != nil {
		rt.embedded.Shutdown()
	}
}

// provisionPatience bounds the wait for a cluster that is still electing
// leaders when a process starts.
const provisionPatience = 60 * time.Second

// service is what every component is: started with a context, stopped once.
type service interface {
	Start(ctx context.Context) error
	Stop()
}

// services are the components a process started, stopped in reverse order
// so the gateway drains before the workers go.
type services struct {
	started []service
}

// start builds and starts the named components in order; each, if not nil,
// sees every started one. On an error the ones already started keep
// running: stop ends them.
func (s *services) start(ctx context.Context, rt *process, names []string, serve bool, each func(service)) error {
	for _, name := range names {
		crt := rt
		if len(names) > 1 {
			var err error
			if crt, err = rt.component(ctx, name); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		svc, err := newService(crt, name, serve)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if svc == nil {
			continue
		}
		if err := svc.Start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		s.started = append(s.started, svc)
		if each != nil {
			each(svc)
		}
	}
	return nil
}

// stop stops the started components, the last started first.
func (s *services) stop() {
	for i := len(s.started) - 1; i >= 0; i-- {
		s.started[i].Stop()
	}
	s.started = nil
}
