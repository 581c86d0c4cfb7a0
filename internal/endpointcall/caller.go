// Package endpointcall is jobgate's endpoint caller (docs/endpoints.md):
// for every endpoint type an operator declared, it takes the type's jobs
// through the worker protocol, as jobgate's own worker (pkg/worker with
// jobgate's credential: the claims, fencing tokens, attempt numbers,
// state rules and fair scheduling are the broker's, unchanged), POSTs each
// attempt, signed as Standard Webhooks, to the type's URL, and reports
// the answer as the attempt's outcome. The dispatcher component runs one
// (system), in `serve` and in `jobgate dispatcher`.
//
// A cancel reaches an attempt as it reaches any worker, at its next beat:
// the caller beats every half second, so the request's context (and with
// it the connection) ends within a second. Each type's requests in flight
// are bounded by its endpoint's concurrency, and their rate by its
// rate_per_second, each across every dispatcher of the deployment
// (slots.go, rate.go). Each request is a client span of the job's trace
// naming the handler's answer (span.go).
package endpointcall

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/egress"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/startstop"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/internal/workerhook"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"
)

// Config tunes a caller. Conn is required.
type Config struct {
	// Conn is the connection the caller's requests to the broker go out
	// on, with jobgate's own permissions.
	Conn *nats.Conn
	// Policy is the address rule every connection to an endpoint is
	// checked against (JOBGATE_ENDPOINT_ALLOW, `serve --dev`). The one
	// pooled client of the caller's requests (egress.NewClient) keeps
	// connections alive, speaks HTTP/2 when offered, follows no redirect
	// and verifies TLS; a request's time, to its first byte and to its
	// last, is its attempt's (the request's context).
	Policy egress.Policy
	// BeatInterval is the longest time between two beats of a request in
	// flight, and so how late a cancel may reach it. Default 500ms.
	BeatInterval time.Duration
	// DrainTimeout is how long a stop lets requests in flight finish
	// before it aborts them and gives their jobs back. Default 10s.
	DrainTimeout time.Duration
	// KeyCacheTTL is how long a type's signing keys are used before they
	// are read again (a rotation signs with the new key at most this
	// late). Default 5s.
	KeyCacheTTL time.Duration
	// Metrics records the requests (metrics.Metrics.NewEndpoints); nil
	// records nothing.
	Metrics *metrics.Endpoints
	// Logger receives structured logs. Default: discarded.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// PublicURL is the gateway's base URL as handlers reach it
	// (JOBGATE_PUBLIC_URL): each request's callback URL starts with it.
	// Empty, or without Stores.Secrets, a request carries no callback and
	// a 202 fails the attempt endpoint_rejected.
	PublicURL string
	// CallbackSecret names the deployment secret callback tokens are
	// signed with. Default natsjs.SecretCallbacks.
	CallbackSecret string
	// AsyncBeatTimeout is how long an attempt answered 202 may go without
	// a callback before it is lost (and retried). Default 30s: the
	// contract's 3 × 10 s.
	AsyncBeatTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.BeatInterval == 0 {
		c.BeatInterval = 500 * time.Millisecond
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.KeyCacheTTL == 0 {
		c.KeyCacheTTL = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.CallbackSecret == "" {
		c.CallbackSecret = natsjs.SecretCallbacks
	}
	if c.AsyncBeatTimeout == 0 {
		c.AsyncBeatTimeout = 30 * time.Second
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	return c
}

// Stores are what the caller reads: the declarations, which it follows,
// and the signing keys (natsjs.TypeStore, natsjs.Secrets).
type Stores struct {
	Types interface {
		WatchTypes(ctx context.Context, fn func(*natsjs.TypeChange)) error
	}
	Keys interface {
		EndpointKeys(ctx context.Context, typ string) (*natsjs.EndpointKeys, error)
	}
	// Slots leases each type's request slots across the deployment
	// (natsjs.SlotStore); nil bounds them in this process only.
	Slots slotLeaser
	// Secrets holds the callback tokens' secret (natsjs.Secrets); nil
	// offers no callbacks.
	Secrets interface {
		Get(ctx context.Context, name string) ([]byte, error)
	}
}

// Caller runs the endpoint types of a deployment.
type Caller struct {
	cfg    Config
	stores Stores
	log    *slog.Logger
	http   *http.Client
	keys   *keyCache
	leases *leases
	name   string
	route  string     // this process's callbacks' subject token
	cb     *callbacks // nil: no callbacks offered
	life   startstop.Lifecycle

	changes chan *natsjs.TypeChange
	done    chan struct{}
	// runners is each endpoint type's runner (only the loop touches it).
	runners map[string]*runner
	gen     atomic.Int64
	stops   sync.WaitGroup
}

// New returns a caller; Start runs it.
func New(cfg Config, stores Stores) (*Caller, error) {
	cfg = cfg.withDefaults()
	if cfg.Conn == nil {
		return nil, errors.New("endpoint caller: a NATS connection is required")
	}
	if stores.Types == nil || stores.Keys == nil {
		return nil, errors.New("endpoint caller: the type and key stores are required")
	}
	var route [8]byte
	_, _ = rand.Read(route[:])
	c := &Caller{cfg: cfg, stores: stores, log: cfg.Logger, http: egress.NewClient(cfg.Policy, 0, 256), name: processName(), route: hex.EncodeToString(route[:]),
		changes: make(chan *natsjs.TypeChange, 256), done: make(chan struct{}), runners: map[string]*runner{}}
	c.keys = &keyCache{src: stores.Keys, ttl: cfg.KeyCacheTTL, now: cfg.Now, m: map[string]cachedKeys{}}
	if stores.Slots != nil {
		c.leases = &leases{store: stores.Slots, holder: c.name, every: natsjs.SlotTTL / 3, log: c.log, held: map[*natsjs.Slot]struct{}{}}
	}
	return c, nil
}

// Start follows the declarations and runs each endpoint type from its
// first declaration seen on.
func (c *Caller) Start(ctx context.Context) error { return c.life.Start(ctx, c.start, c.stop) }

// Stop stops taking work, lets the requests in flight finish within the
// drain time, then aborts the rest and gives their jobs back.
func (c *Caller) Stop(ctx context.Context) error { return c.life.Stop(ctx) }

func (c *Caller) start(sctx, runCtx context.Context) error {
	if err := c.startCallbacks(sctx); err != nil {
		return err
	}
	if err := c.stores.Types.WatchTypes(runCtx, func(ch *natsjs.TypeChange) {
		if ch == nil {
			return
		}
		select {
		case c.changes <- ch:
		case <-runCtx.Done():
		}
	}); err != nil {
		return fmt.Errorf("endpoint caller: follow the types: %w", err)
	}
	go c.loop(runCtx)
	if c.leases != nil {
		go c.leases.run(runCtx)
	}
	c.log.Info("endpoint caller started", "worker", c.name)
	return nil
}

func (c *Caller) stop(ctx context.Context) error {
	<-c.done // the loop ended with the run context
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range c.runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.w.Stop(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if c.cb != nil {
		// The attempts ended with their runners: no callback finds one.
		_ = c.cb.sub.Unsubscribe()
	}
	// Runners retired before the stop (a type deleted or changed) drain
	// on their own time, within the stop's.
	retired := make(chan struct{})
	go func() { c.stops.Wait(); close(retired) }()
	select {
	case <-retired:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("endpoint caller: retired runners still stopping: %w", ctx.Err()))
	}
	c.log.Info("endpoint caller stopped")
	return errors.Join(errs...)
}

// loop applies the declarations' changes, and retries every few seconds
// a type it could not start (its signing key not stored yet).
func (c *Caller) loop(ctx context.Context) {
	defer close(c.done)
	pending := map[string]*job.TypeDecl{}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ch := <-c.changes:
			name := ch.Removed
			if ch.Decl != nil {
				name = ch.Decl.Name
			}
			delete(pending, name)
			if !c.apply(ctx, name, ch.Decl) {
				pending[name] = ch.Decl
			}
		case <-tick.C:
			for name, d := range pending {
				if c.apply(ctx, name, d) {
					delete(pending, name)
				}
			}
		}
	}
}

// apply brings the type's runner in line with its declaration d (nil:
// removed, or not an endpoint type); false when it must be tried again.
func (c *Caller) apply(ctx context.Context, name string, d *job.TypeDecl) bool {
	cur := c.runners[name]
	if d == nil || d.Endpoint == nil || d.Owner != wire.JobgateCredential {
		if cur != nil {
			delete(c.runners, name)
			c.retire(cur, "the type was deleted")
			c.cfg.Metrics.Forget(name)
		}
		return true
	}
	ep := *d.Endpoint
	if cur != nil && cur.concurrency == ep.Concurrency {
		cur.setEndpoint(&ep)
		return true
	}
	c.cfg.Metrics.Limit(name, ep.Concurrency)
	// A type made anew under an old name has a new key: read it now.
	c.keys.forget(name)
	kctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := c.keys.signing(kctx, name)
	cancel()
	if err != nil {
		if !errors.Is(err, job.ErrNotFound) {
			c.log.Warn("endpoint type's signing secret unreadable; its jobs wait", "type", name, "err", err)
		}
		return false
	}
	r, err := c.newRunner(d)
	if err == nil {
		err = r.w.Start(ctx)
	}
	if err != nil {
		c.log.Error("endpoint type not run", "type", name, "err", err)
		return false
	}
	if cur != nil {
		c.retire(cur, "its concurrency changed")
	}
	c.runners[name] = r
	c.log.Info("endpoint type running", "type", name, "url", egress.RedactURL(ep.URL), "concurrency", ep.Concurrency)
	return true
}

// retire stops a runner in the background: its requests in flight finish
// (or are given back after the drain time) while the type's new runner, if
// any, already takes work.
func (c *Caller) retire(r *runner, why string) {
	c.stops.Add(1)
	go func() {
		defer c.stops.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*c.cfg.DrainTimeout)
		defer cancel()
		if err := r.w.Stop(ctx); err != nil {
			c.log.Warn("endpoint type's old runner stopped late", "type", r.typ, "err", err)
		}
		c.log.Info("endpoint type's runner stopped", "type", r.typ, "why", why)
	}()
}

// runner runs one endpoint type: a pkg/worker process of its own whose
// slots are the endpoint's concurrency.
type runner struct {
	c           *Caller
	typ         string
	concurrency int
	w           *worker.Workers
	endpoint    atomic.Pointer[api.Endpoint]
	limiter     atomic.Pointer[rate.Limiter] // rate_per_second in this process, without a slot store
	window      rateWindow                   // rate_per_second across the deployment
	// pending holds each done or fail callback taken, by its attempt's
	// webhook id, until its verdict is on record (verdictHeard).
	pending sync.Map
}

func (c *Caller) newRunner(d *job.TypeDecl) (*runner, error) {
	r := &runner{c: c, typ: d.Name, concurrency: d.Endpoint.Concurrency}
	r.setEndpoint(d.Endpoint)
	w, err := worker.New(worker.Config{
		Conn: c.cfg.Conn, Credential: wire.JobgateCredential,
		Name:   fmt.Sprintf("%s-g%d", c.name, c.gen.Add(1)),
		Logger: c.log.With("type", d.Name), HeartbeatInterval: c.cfg.BeatInterval, DrainTimeout: c.cfg.DrainTimeout,
		NewcomerSlots: -1, // the endpoint's concurrency is the bound
		Now:           c.cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	workerhook.Undeclared(w)
	workerhook.Verdict(w, r.verdictHeard)
	workerhook.Pace(w, r.pace, r.paced)
	if c.leases != nil {
		var waiting sync.Mutex
		workerhook.Gate(w, c.leases.gate(d.Name, func() int { return r.endpoint.Load().Concurrency }, &waiting))
	}
	err = worker.Register(w, worker.Type[json.RawMessage]{
		Name: d.Name, Description: d.Description, Schema: d.Schema,
		Timeout: d.Timeout(), Attempts: d.Attempts, MaxResultBytes: d.MaxResultBytes, ContentType: d.ContentType,
		Concurrency: d.Endpoint.Concurrency, Work: r.call,
	})
	if err != nil {
		return nil, err
	}
	r.w = w
	return r, nil
}

func (r *runner) setEndpoint(ep *api.Endpoint) {
	old := r.endpoint.Swap(ep)
	if old != nil && old.RatePerSecond == ep.RatePerSecond {
		return
	}
	if ep.RatePerSecond <= 0 {
		r.limiter.Store(nil)
		return
	}
	r.limiter.Store(rate.NewLimiter(rate.Limit(ep.RatePerSecond), max(1, int(ep.RatePerSecond))))
}

// keyCache keeps each type's signing keys for a few seconds: a request
// does not read the store.
type keyCache struct {
	src interface {
		EndpointKeys(ctx context.Context, typ string) (*natsjs.EndpointKeys, error)
	}
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[string]cachedKeys
}

type cachedKeys struct {
	keys *natsjs.EndpointKeys
	at   time.Time
}

func (k *keyCache) forget(typ string) {
	k.mu.Lock()
	delete(k.m, typ)
	k.mu.Unlock()
}

func (k *keyCache) signing(ctx context.Context, typ string) ([][]byte, error) {
	now := k.now()
	k.mu.Lock()
	e, ok := k.m[typ]
	k.mu.Unlock()
	if !ok || now.Sub(e.at) >= k.ttl {
		keys, err := k.src.EndpointKeys(ctx, typ)
		if err != nil {
			if ok && !errors.Is(err, job.ErrNotFound) {
				return e.keys.Signing(now), nil // the store is down: the last keys read still sign
			}
			return nil, err
		}
		e = cachedKeys{keys: keys, at: now}
		k.mu.Lock()
		k.m[typ] = e
		k.mu.Unlock()
	}
	return e.keys.Signing(now), nil
}

// processName names this process's runners in the records they claim and
// GET /v1/admin/workers.
func processName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, host)
	if len(host) > 64 {
		host = host[:64]
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("endpoints-%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
