package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/index"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/required"
	"github.com/jobgate/jobgate/internal/startstop"
)

// records is what the gateway needs of the job record store
// (natsjs.Store). Errors wrap job.ErrNotFound, job.ErrUnavailable,
// natsjs.ErrExists (a taken create) and natsjs.ErrStale.
type records interface {
	Create(ctx context.Context, r *job.Record) error
	Get(ctx context.Context, key string) (*job.Record, error)
	FindInTenant(ctx context.Context, tenant, id string) (*job.Record, error)
	List(ctx context.Context, tenant, requester string) ([]*job.Record, error)
	Mutate(ctx context.Context, key string, fn func(*job.Record) error) (*job.Record, error)
	Ping(ctx context.Context) error
}

// workQueue takes the work message of an admitted job (natsjs.WorkQueue).
type workQueue interface {
	Publish(ctx context.Context, r *job.Record, generation int) error
}

// secretStore hands out the deployment-wide secrets (natsjs.Secrets).
type secretStore interface {
	Get(ctx context.Context, name string) ([]byte, error)
}

// resultFiles opens stored results (natsjs.ResultFiles); a gone object is
// job.ErrResultExpired. TenantUse reads each tenant's stored result bytes,
// for its result quota (storage.go).
type resultFiles interface {
	Open(ctx context.Context, name string) (*natsjs.ResultFile, error)
	tenantResults
}

// recordWatch is a running watch of every record change (natsjs.RecordWatch).
type recordWatch interface {
	Changes() <-chan natsjs.RecordChange
	Stop()
}

// eventStream takes the event of a change the gateway wrote (a cancel)
// (natsjs.EventStream).
type eventStream interface {
	Publish(ctx context.Context, r *job.Record) (bool, error)
}

// changeSource starts a watch of every record change (natsjs.Store).
type changeSource interface {
	WatchChanges() (*natsjs.RecordWatch, error)
}

// Stores are the adapters a gateway works on, every one required (New
// names a missing one). system maps the provisioned resources to
// them; a test may stub any of them.
type Stores struct {
	Jobs    records       // job records (natsjs.Store)
	Work    workQueue     // work messages of admitted jobs (natsjs.WorkQueue)
	Events  eventStream   // job events, for what the gateway changes and streams (natsjs.EventStream)
	Secrets secretStore   // deployment secrets: job ids and result links (natsjs.Secrets)
	Files   resultFiles   // stored results (natsjs.ResultFiles)
	Types   typeSource    // job type declarations and worker presence (natsjs.TypeStore)
	Batches batchRecords  // batch records (natsjs.BatchStore)
	Storage storageSource // the byte budgets' use, checked on admission (natsjs.Resources.StorageUse)
	Changes changeSource  // every record change, for long-polls and event streams (natsjs.Store)
	Log     index.Source  // the record change log the query index (lists, the admin API) derives from (index.StoreSource)
	Slots   flowSlots     // the types' concurrency places and rate buckets, read to say what a job waits for (natsjs.SlotStore)
}

// Gateway is the HTTP API service.
type Gateway struct {
	cfg      Config
	jobs     records
	work     workQueue
	events   eventStream
	types    *typeRegistry
	secrets  secretStore
	files    resultFiles
	batches  batchRecords
	indexSrc index.Source
	slots    flowSlots
	query    queryIndex    // the query index (lists, the admin API): opened by Start or Init, before any request
	indexTmp string        // its temporary dir, when no IndexDir is configured
	bulk     chan struct{} // the bulk admin calls under way (maxBulkCalls)
	log      *slog.Logger
	app      *fiber.App
	verifier *auth.Verifier
	idSecret []byte
	cbSecret []byte // signs callback tokens (nil: no callbacks relayed)
	ids      *job.IDDeriver
	signer   *linkSigner
	seen     *seenKeys
	reads    *limiter
	submits  *limiter
	cancels  *limiter
	streams  *holds // open event streams
	polls    *holds // waiting long-polls
	storage  *storageGate
	changes  *changeFeed
	sseOpen  atomic.Int64

	ln      net.Listener
	stopped chan struct{} // closed when Stop begins: streams and long-polls end
	life    startstop.Lifecycle
}

// New builds a gateway on st, every field of which is required.
func New(cfg Config, st Stores, log *slog.Logger) (*Gateway, error) {
	if err := CheckDev(cfg.withDefaults().Addr, cfg.Dev); err != nil {
		return nil, err
	}
	if err := required.Fields(st); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return newGateway(cfg, st, log)
}

// newGateway is New without the check of st (the in-memory tests build
// theirs complete with memStores).
func newGateway(cfg Config, st Stores, log *slog.Logger) (*Gateway, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}

	if log == nil {
		log = slog.Default()
	}
	g := &Gateway{
		cfg: cfg, jobs: st.Jobs, work: st.Work, events: st.Events, secrets: st.Secrets, files: st.Files, indexSrc: st.Log, log: log, batches: st.Batches,
		slots:    st.Slots,
		types:    newTypeRegistry(st.Types, log),
		verifier: auth.NewVerifier(cfg.AuthSecret, cfg.Now, cfg.authOptions()...),
		seen:     newSeenKeys(1 << 16),
		bulk:     make(chan struct{}, maxBulkCalls),
		reads:    newLimiter(cfg.ReadRate, cfg.ReadBurst, cfg.Now),
		submits:  newLimiter(cfg.SubmitRate, cfg.SubmitBurst, cfg.Now),
		cancels:  newLimiter(cfg.SubmitRate, cfg.SubmitBurst, cfg.Now),
		streams:  newHolds("event streams", cfg.MaxStreamsPerRequester, cfg.MaxStreamsPerTenant, cfg.MaxStreams),
		polls:    newHolds("long-polls", cfg.MaxLongPollsPerRequester, cfg.MaxLongPollsPerTenant, cfg.MaxLongPolls),
		stopped:  make(chan struct{}),
		changes:  newChangeFeed(func() (recordWatch, error) { return st.Changes.WatchChanges() }),
	}
	var err error
	if g.storage, err = newStorageGate(st.Storage, st.Files, cfg, log); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.app = fiber.New(fiber.Config{
		AppName: "jobgate",
		// The transport takes up to 1 MiB so that an oversized submission
		// gets a 413 problem from the handler instead of a reset connection.
		BodyLimit: transportBodyLimit,
		// The request line and headers must fit in the read buffer (Fiber's
		// default, stated here because it is the bound on header memory);
		// past it the client gets a 4xx problem.
		ReadBufferSize: 4 << 10,
		// Forms are parsed only by the one route that reads one, and then
		// from the bounded, identity-coded body.
		DisablePreParseMultipartForm: true,
		DisableStartupMessage:        true,
		ReadTimeout:                  40 * time.Second,
		WriteTimeout:                 0, // SSE streams write for as long as the job runs
		IdleTimeout:                  120 * time.Second,
		ErrorHandler:                 g.handleError,
	})
	// writeProblem finds the gateway's logger by its app.
	appLogs.Store(g.app, log)
	httpMetrics, err := cfg.Metrics.NewHTTP()
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	httpMetrics.CanRunOutOfStorage("/v1/jobs", "/v1/batches") // the admissions
	g.app.Use(countRequests(httpMetrics))                     // first: it counts every answer, refusals included
	g.app.Use(refuseContentCoding)                            // ahead of every route: nothing decodes a compressed body
	g.routes()
	cfg.Metrics.ObserveSSE(g.SSEStreams)
	if err := cfg.Metrics.ObserveTypeWorkers(func() []metrics.TypeWorkers { return g.types.typeWorkers(cfg.Now()) }); err != nil {
		log.Warn("per-type worker gauges not exported: another gateway of this process exports them", "err", err)
	}
	return g, nil
}

// App exposes the Fiber app (tests use app.Test for in-memory requests).
func (g *Gateway) App() *fiber.App { return g.app }

// Addr is the address the gateway listens on once started.
func (g *Gateway) Addr() string {
	if g.ln == nil {
		return g.cfg.Addr
	}
	return g.ln.Addr().String()
}

// Start loads the deployment secrets and the declared types and begins
// serving; it returns once the listener is bound, so a port clash is an
// error here and not in a goroutine. ctx bounds only this start-up: the
// gateway then serves, and watches the declared types, until Stop.
func (g *Gateway) Start(ctx context.Context) error {
	return g.life.Start(ctx, func(sctx, runCtx context.Context) error {
		if err := g.init(sctx, runCtx); err != nil {
			return err
		}
		return g.listen()
	}, g.stop)
}

func (g *Gateway) listen() error {
	ln := g.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", g.cfg.Addr); err != nil {
			g.types.stop()
			g.closeIndex()
			return fmt.Errorf("gateway listen %s: %w", g.cfg.Addr, err)
		}
	}
	g.ln = ln
	ln = lingerListener{ln} // a 413 reaches a client still sending its body
	go func() {
		if err := g.app.Listener(ln); err != nil && !errors.Is(err, net.ErrClosed) {
			g.log.Error("gateway stopped serving", "err", err)
		}
	}()
	g.log.Info("gateway listening", "addr", ln.Addr().String())
	return nil
}

// init loads what the handlers need from JetStream within ctx; the type
// watch runs on runCtx's values until Stop. Start calls it, and in-memory
// tests that use App() without listening call Init. On an error it undoes
// what it started.
func (g *Gateway) init(ctx, runCtx context.Context) (err error) {
	if err := g.types.start(ctx, context.WithoutCancel(runCtx)); err != nil {
		return fmt.Errorf("gateway: job types: %w", err)
	}
	defer func() {
		if err != nil {
			g.types.stop()
		}
	}()
	if g.idSecret, err = g.secrets.Get(ctx, natsjs.SecretJobID); err != nil {
		return err
	}
	g.ids = job.NewIDDeriver(g.idSecret)
	linkKey, err := g.secrets.Get(ctx, natsjs.SecretLinks)
	if err != nil {
		return err
	}
	g.signer = &linkSigner{key: linkKey, ttl: g.cfg.LinkTTL, now: g.cfg.Now}
	if g.cfg.Callbacks != nil {
		if g.cbSecret, err = g.secrets.Get(ctx, natsjs.SecretCallbacks); err != nil {
			return err
		}
	}
	if g.query == nil {
		if err := g.openIndex(); err != nil {
			return err
		}
	}
	g.storage.start(runCtx) // the tenants' stored results, read until Stop
	return nil
}

// Init prepares the gateway for App().Test without a listener: Start
// without listening (Stop ends it).
func (g *Gateway) Init(ctx context.Context) error { return g.life.Start(ctx, g.init, g.stop) }

// stopBound bounds a Stop whose ctx has no deadline: a request that never
// ends must not hold the process.
const stopBound = 10 * time.Second

// Stop ends event streams and long-polls, stops listening and drains the
// requests in flight within ctx (10 s when ctx has no deadline), then stops
// the type watch. When the drain did not finish in time it returns an
// error wrapping ctx.Err(). It is safe to call more than once and before
// or without Start; a Stop during Start ends the start-up.
func (g *Gateway) Stop(ctx context.Context) error {
	if err := g.life.Stop(ctx); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

func (g *Gateway) stop(ctx context.Context) error {
	close(g.stopped)
	defer g.storage.wait()
	defer appLogs.Delete(g.app)
	defer g.changes.close()
	defer g.types.stop()
	defer g.closeIndex()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, stopBound)
		defer cancel()
	}
	if err := g.app.ShutdownWithContext(ctx); err != nil {
		g.log.Warn("gateway shutdown: requests cut off", "err", err)
		return fmt.Errorf("drain: %w", err)
	}
	return nil
}
