package system

import (
	"context"
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/dispatcher"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/gateway"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/endpointcall"
	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/internal/telemetry"
	"github.com/jobgate/jobgate/internal/tenantquota"
	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/renderer"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Component names a part of the system a process may run.
type Component string

// The components, in their start order (see the package doc).
const (
	Notifier   Component = "notifier"
	Dispatcher Component = "dispatcher"
	Renderer   Component = "renderer"
	Gateway    Component = "gateway"
)

// order is the start order; Stop goes backwards. Config.Workers start
// right after the renderer.
var order = []Component{Notifier, Dispatcher, Renderer, Gateway}

// ParseComponent returns the component of that name.
func ParseComponent(name string) (Component, error) {
	c := Component(name)
	if !slices.Contains(order, c) {
		return "", fmt.Errorf("unknown component %q (gateway, dispatcher, renderer or notifier)", name)
	}
	return c, nil
}

// Service is what every running part is: started once, stopped once, with
// internal/startstop's meaning of both. Start's ctx bounds only the
// start-up; the service runs until Stop. Stop honours its ctx's deadline
// (forcing what it can and returning an error wrapping ctx.Err() when the
// drain did not finish in time), is safe to call more than once and
// without Start, and ends a start-up in progress instead of waiting for it.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// WorkerFunc builds a worker of the process's own beside the renderer (a
// test's type, the bench's no-op type) on nc, a NATS connection of its own
// with jobgate's permissions, closed by Stop. It is started after the
// renderer, before the gateway, and stopped with the workers.
type WorkerFunc func(s *System, nc *nats.Conn) (Service, error)

// Config says what to run. The zero value is `jobgate serve` with no
// settings: every component, internal/config's defaults, logs on stderr.
type Config struct {
	// Settings are the deployment's settings; nil is config.Default().
	// Start validates them. Settings.Dev is honoured (the page's
	// /dev/token sign-in, loopback addresses only): a component command
	// clears it, since only serve offers it.
	Settings *config.Config
	// Components are the parts this process runs, started in the package
	// doc's order whatever the order here; nil runs all four.
	Components []Component
	// LogOutput receives the logs, in Settings.LogFormat at
	// Settings.LogLevel; nil is os.Stderr.
	LogOutput io.Writer
	// Renderer, if set, adjusts the renderer's settings after they were
	// taken from Settings (tests: OnRender, DrainTimeout, MaxPages).
	Renderer func(*renderer.Config)
	// Dispatcher, if set, adjusts the dispatcher's settings after they
	// were taken from Settings (tests: the broker's RetryBase).
	Dispatcher func(*dispatcher.Config)
	// EndpointCaller, if set, adjusts the endpoint caller's settings
	// (tests: how long an asynchronous attempt may go without a beat).
	EndpointCaller func(*endpointcall.Config)
	// Workers are more workers of the process's own (see WorkerFunc).
	Workers []WorkerFunc
}

// System is a started jobgate process: its NATS (embedded or external),
// the provisioned resources and the running components.
type System struct {
	settings config.Config
	name     string // "serve", or the one component's name
	log      *slog.Logger
	metrics  *metrics.Metrics
	fp       *failpoint.Set
	run      map[Component]bool
	// adjustCaller is Config.EndpointCaller.
	adjustCaller func(*endpointcall.Config)

	unlock   func()
	listener net.Listener // the gateway's, bound first; nil without one
	opsLn    net.Listener // settings.OpsAddr's in a process without the gateway (ops.go)
	secret   []byte       // of bearer tokens; nil without a gateway

	embedded *natsserver.Embedded // nil against an external NATS
	nc       *nats.Conn
	res      *natsjs.Resources
	connect  func(name string) (*nats.Conn, error)

	// quota is the tally of the tenants' stored result bytes that the
	// gateway and the broker share when both run here (startQuota), read
	// until stopQuota; nil otherwise.
	quota     *tenantquota.Tally
	stopQuota func()

	gw      *gateway.Gateway
	mu      sync.Mutex
	own     []*nats.Conn
	started []namedService

	traceShutdown func(context.Context) error // telemetry.Setup's

	stopOnce sync.Once
	stopDone chan struct{}
	stopErr  error
}

type namedService struct {
	name  string
	stage stage
	svc   Service
}

// stage is a step of Stop: the services of one stage stop together.
type stage int

// The stages in Stop's order (the reverse of the start order).
const (
	stageGateway stage = iota
	stageWorkers       // the renderer and Config.Workers
	stageDispatcher
	stageNotifier
)

// stageWeights share a Stop's deadline out between the stages: each gets
// its weight's part of the time left when it begins (what an earlier stage
// did not use goes to the later ones). The workers weigh most: their
// running jobs finish or are given back, which takes longest.
var stageWeights = [...]int{stageGateway: 2, stageWorkers: 4, stageDispatcher: 2, stageNotifier: 2}

// StopTimeout is the shutdown deadline cmd/jobgate gives Stop on SIGTERM:
// within an orchestrator's usual grace period (Kubernetes: 30 s) before it
// kills the process.
const StopTimeout = 25 * time.Second

func stageOf(c Component) stage {
	switch c {
	case Gateway:
		return stageGateway
	case Renderer:
		return stageWorkers
	case Dispatcher:
		return stageDispatcher
	}
	return stageNotifier
}

// provisionPatience bounds the wait for a cluster that is still electing
// leaders when a process starts.
const provisionPatience = 60 * time.Second

// Start builds the system and starts its components (see the package doc
// for the order). ctx bounds only the start: the components run until
// Stop, whatever becomes of ctx (each Service's Start means the same). On
// an error, what was started is stopped again.
func Start(ctx context.Context, cfg Config) (*System, error) {
	settings := config.Default()
	if cfg.Settings != nil {
		settings = *cfg.Settings
	}
	if err := settings.Validate(); err != nil {
		return nil, fmt.Errorf("invalid settings: %w", err)
	}
	fp, err := failpoint.Parse(settings.Failpoints)
	if err != nil {
		return nil, err
	}
	s := &System{settings: settings, fp: fp, metrics: metrics.New(), run: map[Component]bool{}, unlock: func() {}, adjustCaller: cfg.EndpointCaller}
	if cfg.Components == nil {
		cfg.Components = order
	}
	for _, c := range cfg.Components {
		if _, err := ParseComponent(string(c)); err != nil {
			return nil, err
		}
		s.run[c] = true
	}
	s.name = "serve"
	if len(s.run) == 1 && len(cfg.Workers) == 0 {
		s.name = string(cfg.Components[0])
	}
	if s.run[Gateway] {
		if err := gateway.CheckDev(settings.HTTPAddr, settings.Dev); err != nil {
			return nil, err // before anything is created
		}
	}
	logw := cfg.LogOutput
	if logw == nil {
		logw = os.Stderr
	}
	s.log = NewLogger(&settings, logw)
	if s.name != "serve" {
		s.log = s.log.With("process", s.name)
	}
	service := "jobgate"
	if s.name != "serve" {
		service += "-" + s.name
	}
	// Tracing from the OTEL_* variables (a no-op without them), before
	// any component starts a span; flushed by Stop, after the components.
	shutdown, err := telemetry.Setup(ctx, service)
	if err != nil {
		return nil, err
	}
	s.traceShutdown = shutdown

	if err := s.claim(); err != nil {
		_ = s.Stop(context.Background())
		return nil, err
	}
	if err := s.open(ctx); err != nil {
		_ = s.Stop(context.Background())
		return nil, err
	}
	if err := s.startComponents(ctx, cfg); err != nil {
		_ = s.Stop(context.Background())
		return nil, err
	}
	if s.opsLn != nil {
		// Started last, so /readyz answers once every component runs; it
		// stops with the gateway's stage, first.
		ops := s.newOps(s.opsLn)
		_ = ops.Start(ctx)
		s.mu.Lock()
		s.started = append(s.started, namedService{"ops", stageGateway, ops})
		s.mu.Unlock()
		s.log.Info("ops listening", "addr", s.opsLn.Addr().String())
	}
	return s, nil
}

// claim takes the data dir's lock (embedded server only), then binds the
// gateway's address and loads the token secret, so a second server on the
// same data dir or a taken port fails at once, naming the lock or the
// address, before the embedded server, the secrets or any stream is
// touched.
func (s *System) claim() error {
	if s.settings.Embedded() {
		unlock, err := lockDataDir(s.settings.DataDir)
		if err != nil {
			return err
		}
		s.unlock = unlock
	}
	if !s.run[Gateway] {
		if s.settings.OpsAddr != "" {
			ln, err := net.Listen("tcp", s.settings.OpsAddr)
			if err != nil {
				return fmt.Errorf("ops listen %s (ops_addr, JOBGATE_OPS_ADDR): %w", s.settings.OpsAddr, err)
			}
			s.opsLn = ln
		}
		return nil
	}
	ln, err := net.Listen("tcp", s.settings.HTTPAddr)
	if err != nil {
		return fmt.Errorf("gateway listen %s: %w", s.settings.HTTPAddr, err)
	}
	s.listener = ln
	s.secret, err = auth.LoadSecret(s.settings.AuthSecret, s.settings.DataDir, s.settings.Embedded())
	return err
}

// workersOnly says the process runs nothing but workers: on an external
// NATS it may hold a credential limited to the worker protocol.
func (s *System) workersOnly() bool {
	return len(s.run) == 1 && s.run[Renderer]
}

// open connects (starting the embedded server when no URL is set) and
// provisions the deployment's streams and buckets.
func (s *System) open(ctx context.Context) error {
	var err error
	if s.settings.Embedded() {
		ec := natsserver.EmbeddedConfig{StoreDir: s.settings.Path("nats"), Listen: s.settings.NATS.Listen, SyncAlways: s.settings.NATS.SyncAlways,
			MaxStore: s.layout().StorageReserve()}
		if s.settings.NATS.Listen != "" {
			// Every client of the listener logs in with tenant subscriber
			// or worker credentials (`jobgate nats-user`), which confine
			// it; the in-process connections keep full access.
			secret, err := natsserver.SubscriberSecret(s.settings.DataDir)
			if err != nil {
				return err
			}
			ta, err := natsserver.NewTenantAuth(secret)
			if err != nil {
				return err
			}
			ta.Log = s.log.With("component", "nats")
			ec.Configure = ta.Configure
		}
		if s.embedded, err = natsserver.StartEmbedded(ec); err != nil {
			return err
		}
		s.noteNATSURL()
		s.connect = func(n string) (*nats.Conn, error) {
			return s.embedded.Connect("jobgate-"+n, nats.ErrorHandler(s.natsAsyncError(n)))
		}
	} else {
		n := s.settings.NATS
		cc := natsjs.ConnectConfig{
			URL: n.URL, CredsFile: n.CredsFile, NKeyFile: n.NKeyFile, User: n.User, Password: n.Password,
			TLSCA: n.TLSCA, TLSCert: n.TLSCert, TLSKey: n.TLSKey,
		}
		if s.workersOnly() {
			// jobgate's own workers may run with a credential limited to
			// their protocol subjects, whose replies come under jobgate's
			// worker inbox (docs/protocol.md).
			cc.InboxPrefix = wire.InboxPrefix(wire.JobgateCredential)
		}
		s.connect = func(name string) (*nats.Conn, error) {
			c := cc
			c.Name = "jobgate-" + name
			c.OnAsyncError = s.natsAsyncError(name)
			return natsjs.Connect(c)
		}
	}
	if s.nc, err = s.connect(s.name); err != nil {
		return err
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	layout := s.layout()
	// Provision retries what a forming cluster outgrows (no leader yet,
	// too few peers) by itself; this bounds how long it may.
	pctx, cancel := context.WithTimeout(ctx, provisionPatience)
	defer cancel()
	if s.workersOnly() && !s.settings.Embedded() {
		// Workers create nothing (worker credentials may not): they bind
		// to what the deployment's services provisioned, waiting for it.
		s.res, err = natsjs.Bind(pctx, js)
	} else {
		s.res, err = natsjs.Provision(pctx, js, layout)
	}
	return err
}

// startComponents starts what the process runs in the package doc's order.
func (s *System) startComponents(ctx context.Context, cfg Config) error {
	shared := len(s.run)+len(cfg.Workers) == 1
	if err := s.startQuota(); err != nil {
		return err
	}
	// res is the resources a component uses: the process's when it runs
	// alone, else on a connection of its own, so one component's traffic
	// (a worker's requests, the relay's publishes) does not queue the
	// gateway's admissions behind it in one connection's read loop, write
	// lock and response mux (docs/performance.md, the bench's pipeline
	// section).
	res := func(name string) (*natsjs.Resources, *nats.Conn, error) {
		if shared {
			return s.res, s.nc, nil
		}
		nc, err := s.OwnConn(name)
		if err != nil {
			return nil, nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, nil, fmt.Errorf("jetstream: %w", err)
		}
		bctx, cancel := context.WithTimeout(ctx, provisionPatience)
		defer cancel()
		r, err := natsjs.Rebind(bctx, js, s.res)
		return r, nc, err
	}
	start := func(name string, build func(*natsjs.Resources, *nats.Conn) (Service, error)) error {
		r, nc, err := res(name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		svc, err := build(r, nc)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := svc.Start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		s.mu.Lock()
		s.started = append(s.started, namedService{name, stageOf(Component(name)), svc})
		s.mu.Unlock()
		return nil
	}
	for _, c := range order {
		if c == Gateway {
			// Config.Workers follow the renderer, ahead of the gateway.
			if err := s.startWorkers(ctx, cfg.Workers); err != nil {
				return err
			}
		}
		if !s.run[c] {
			continue
		}
		var err error
		switch c {
		case Notifier:
			err = start(string(c), func(r *natsjs.Resources, _ *nats.Conn) (Service, error) { return s.newNotifier(r) })
		case Dispatcher:
			err = start(string(c), func(r *natsjs.Resources, _ *nats.Conn) (Service, error) { return s.newDispatcher(r, cfg.Dispatcher) })
		case Renderer:
			err = start(string(c), func(_ *natsjs.Resources, nc *nats.Conn) (Service, error) {
				return s.newRenderer(nc, cfg.Renderer)
			})
		case Gateway:
			err = start(string(c), func(r *natsjs.Resources, nc *nats.Conn) (Service, error) {
				gw, err := s.newGateway(r, nc)
				s.gw = gw
				return gw, err
			})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// startWorkers starts Config.Workers, each on a connection of its own.
func (s *System) startWorkers(ctx context.Context, workers []WorkerFunc) error {
	for i, build := range workers {
		name := fmt.Sprintf("worker-%d", i+1)
		nc, err := s.OwnConn(name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		svc, err := build(s, nc)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := svc.Start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		s.mu.Lock()
		s.started = append(s.started, namedService{name, stageWorkers, svc})
		s.mu.Unlock()
	}
	return nil
}

// Stop stops the components in the reverse of their start order, one stage
// at a time: the gateway drains first, then the workers (the renderer and
// Config.Workers together), the dispatcher and the notifier (see the
// package doc). Each stage gets its share of ctx's deadline
// (stageWeights); one that overruns it is cut off (its Stop forces what it
// can) and the next begins. Then Stop closes the NATS connections, shuts
// the embedded server down and drops the data dir's lock. The error joins
// those of the stages that did not stop in time. It is safe to call more
// than once; later calls wait for the first and return its result.
func (s *System) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopDone = make(chan struct{})
		started := s.started
		s.started = nil
		s.mu.Unlock()
		defer close(s.stopDone)
		var errs []error
		for st := stageGateway; st <= stageNotifier; st++ {
			var group []namedService
			for i := len(started) - 1; i >= 0; i-- {
				if started[i].stage == st {
					group = append(group, started[i])
				}
			}
			if len(group) == 0 {
				continue
			}
			errs = append(errs, s.stopStage(ctx, st, group))
		}
		if s.stopQuota != nil {
			s.stopQuota() // after the gateway and the broker, which count on it
		}
		if s.traceShutdown != nil {
			// The spans of the components' last work go out before the
			// process ends; a backend that is down costs at most this.
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := s.traceShutdown(tctx); err != nil {
				s.log.Warn("traces not flushed", "err", err)
			}
			cancel()
		}
		s.closeConns()
		if s.embedded != nil {
			s.forgetNATSURL()
			s.embedded.Shutdown()
		}
		// The listener is closed by the gateway when it stops; closing it
		// again is a no-op. The lock goes last, after the server stopped.
		if s.listener != nil {
			_ = s.listener.Close()
		}
		if s.opsLn != nil {
			_ = s.opsLn.Close() // served by the ops server, which stopped with the gateway's stage; or never started
		}
		s.unlock()
		s.stopErr = errors.Join(errs...)
	})
	s.mu.Lock()
	done := s.stopDone
	s.mu.Unlock()
	<-done
	return s.stopErr
}

// stopStage stops the services of one stage together within the stage's
// share of ctx.
func (s *System) stopStage(ctx context.Context, st stage, group []namedService) error {
	if dl, ok := ctx.Deadline(); ok {
		rest := 0
		for later := st; later <= stageNotifier; later++ {
			rest += stageWeights[later]
		}
		share := time.Until(dl) * time.Duration(stageWeights[st]) / time.Duration(rest)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, share)
		defer cancel()
	}
	errs := make([]error, len(group))
	var wg sync.WaitGroup
	for i, ns := range group {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			s.log.Debug("stopping", "component", ns.name)
			if err := ns.svc.Stop(ctx); err != nil {
				errs[i] = fmt.Errorf("system: stop %s: %w", ns.name, err)
				s.log.Warn("component cut off", "component", ns.name, "took", time.Since(began), "err", err)
				return
			}
			s.log.Info("component stopped", "component", ns.name, "took", time.Since(began))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *System) closeConns() {
	s.mu.Lock()
	own := s.own
	s.own = nil
	s.mu.Unlock()
	for i := len(own) - 1; i >= 0; i-- {
		_ = own[i].Drain()
		own[i].Close()
	}
	if s.nc != nil {
		_ = s.nc.Drain()
		s.nc.Close()
	}
}

// OwnConn opens another NATS connection like the process's (jobgate's
// permissions), closed by Stop.
func (s *System) OwnConn(name string) (*nats.Conn, error) {
	nc, err := s.connect(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.own = append(s.own, nc)
	s.mu.Unlock()
	return nc, nil
}

// URL is the gateway's base URL (http://host:port, the port it bound), or
// "" when the process runs no gateway.
func (s *System) URL() string {
	if s.listener == nil {
		return ""
	}
	return "http://" + s.listener.Addr().String()
}

// OpsURL is where a process without the gateway serves /healthz, /readyz
// and /metrics (Settings.OpsAddr, the port bound); "" without one.
func (s *System) OpsURL() string {
	if s.opsLn == nil {
		return ""
	}
	return "http://" + s.opsLn.Addr().String()
}

// NATSURL is where NATS clients outside the process connect: the embedded
// server's listen URL (Settings.NATS.Listen; "" when it listens for none)
// or the external NATS's URLs.
func (s *System) NATSURL() string {
	if s.embedded != nil {
		return s.embedded.ClientURL()
	}
	return s.settings.NATS.URL
}

// Settings are the settings the system runs with.
func (s *System) Settings() config.Config { return s.settings }

// Logger is the process's logger.
func (s *System) Logger() *slog.Logger { return s.log }

// Resources are the provisioned streams and buckets on the process's own
// connection (tests look behind the API with them).
func (s *System) Resources() *natsjs.Resources { return s.res }

// Conns lists the process's NATS connections (the bench sums their
// counters).
func (s *System) Conns() []*nats.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*nats.Conn{s.nc}, s.own...)
}

// Gateway is the running gateway, nil when the process runs none.
func (s *System) Gateway() *gateway.Gateway { return s.gw }

// Secret is the secret bearer tokens are signed with; nil when the
// process runs no gateway.
func (s *System) Secret() []byte { return s.secret }

// Token mints a bearer token for id, valid for ttl, the way `jobgate
// token` does (with the configured audience and issuer).
func (s *System) Token(id auth.Identity, ttl time.Duration) (string, error) {
	if s.secret == nil {
		return "", errors.New("system: no gateway runs here, so no token secret is loaded")
	}
	return auth.Mint(s.secret, id, ttl, time.Now(), auth.WithAudience(s.settings.AuthAudience), auth.WithIssuer(s.settings.AuthIssuer))
}

// WorkerCredentials are what a worker process outside jobgate's process
// logs in with.
type WorkerCredentials struct {
	URL      string // the embedded server's listen URL
	User     string
	Password string
}

// WorkerCredentials are the credentials `jobgate nats-user --worker --type
// T ...` prints for types: they let a worker process declare and run
// those types and nothing else. Only an embedded server that listens for
// NATS clients (Settings.NATS.Listen) accepts them.
func (s *System) WorkerCredentials(types ...string) (WorkerCredentials, error) {
	if s.embedded == nil || s.embedded.ClientURL() == "" {
		return WorkerCredentials{}, errors.New("system: worker credentials are for an embedded server that listens for NATS clients (Settings.NATS.Listen)")
	}
	user, err := natsserver.WorkerUser(types)
	if err != nil {
		return WorkerCredentials{}, err
	}
	secret, err := natsserver.SubscriberSecret(s.settings.DataDir)
	if err != nil {
		return WorkerCredentials{}, err
	}
	return WorkerCredentials{URL: s.embedded.ClientURL(), User: user, Password: natsserver.WorkerPassword(secret, user)}, nil
}

// NewLogger is the logger of settings' format and level, writing to w.
func NewLogger(settings *config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(strings.ToUpper(settings.LogLevel)))
	opts := &slog.HandlerOptions{Level: lvl}
	if settings.LogFormat == "json" {
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts)))
}

// Declare is a worker that only declares decls, as their workers would on
// start, and runs none of their jobs: for a process whose gateway must
// admit a type no worker of it runs (the bench's target without the
// renderer, tests that drive jobs by hand). The declarations are stored
// before the gateway starts, so it admits them from its first request.
func Declare(decls ...*job.TypeDecl) WorkerFunc {
	return func(s *System, _ *nats.Conn) (Service, error) { return declaration{s.res, decls}, nil }
}

type declaration struct {
	res   *natsjs.Resources
	decls []*job.TypeDecl
}

func (d declaration) Start(ctx context.Context) error {
	for _, decl := range d.decls {
		c := *decl
		c.DeclaredAt = time.Now().UTC()
		if err := d.res.Types.Declare(ctx, &c); err != nil {
			return fmt.Errorf("declare %s: %w", c.Name, err)
		}
	}
	return nil
}

func (declaration) Stop(context.Context) error { return nil }

// layout is the deployment's JetStream layout as the settings make it.
func (s *System) layout() natsjs.Layout {
	l := natsjs.DefaultLayout()
	l.Replicas = s.settings.NATS.Replicas
	l.JobTTL = s.settings.JobTTL
	l.ResultTTL = s.settings.ResultTTL
	l.StoreMaxBytes, l.ResultsMaxBytes = s.settings.StoreMaxBytes, s.settings.ResultsMaxBytes
	return l
}
