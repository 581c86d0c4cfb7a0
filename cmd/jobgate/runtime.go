package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runtime is what every service of a process shares: settings, logger, the
// NATS connection (to an embedded or external server) and the provisioned
// JetStream resources.
type runtime struct {
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
func openRuntime(ctx context.Context, cfg *config.Config, name string, logw io.Writer, configure ...func(*natsjs.EmbeddedConfig)) (*runtime, error) {
	rt := &runtime{cfg: cfg, log: newLogger(cfg, logw), metrics: metrics.New()}
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
		rt.nc, err = rt.embedded.Connect("jobgate-" + name)
	} else {
		rt.nc, err = natsjs.Connect(natsjs.ConnectConfig{
			URL: cfg.NATS.URL, Name: "jobgate-" + name, CredsFile: cfg.NATS.CredsFile, NKeyFile: cfg.NATS.NKeyFile,
			User: cfg.NATS.User, Password: cfg.NATS.Password, TLSCA: cfg.NATS.TLSCA, TLSCert: cfg.NATS.TLSCert, TLSKey: cfg.NATS.TLSKey,
		})
	}
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
	// Provisioning waits for a cluster that is still electing leaders.
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		rt.res, err = natsjs.Provision(pctx, js, layout)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil || !natsjs.Unavailable(err) {
			break
		}
		rt.log.Warn("jetstream not ready, retrying provisioning", "err", err)
		time.Sleep(time.Second)
	}
	if err != nil {
		rt.close()
		return nil, err
	}
	return rt, nil
}

func (rt *runtime) close() {
	if rt.nc != nil {
		_ = rt.nc.Drain()
		rt.nc.Close()
	}
	if rt.embedded != nil {
		rt.embedded.Shutdown()
	}
}

// service is what every component is: started with a context, stopped once.
type service interface {
	Start(ctx context.Context) error
	Stop()
}
