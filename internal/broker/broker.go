package broker

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/required"
	"github.com/jobgate/jobgate/internal/startstop"
	"github.com/jobgate/jobgate/internal/tenantquota"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/nats-io/nats.go"
)

// QueueGroup is the NATS queue group of every broker: each request is
// handled by one of them.
const QueueGroup = "jobgate-broker"

// SecretClaims is the deployment secret that signs claim tokens, shared by
// every broker so that any of them can check any claim.
const SecretClaims = "secret.claims"

// opTimeout bounds one store operation.
const opTimeout = 10 * time.Second

// Broker answers the requests of worker processes.
type Broker struct {
	cfg    Config
	stores Stores // the adapters it works on
	nc     *nats.Conn
	log    *slog.Logger
	secret []byte
	// started is when Start began: no claim is judged silent for a time
	// before it (signOf).
	started time.Time

	ctx    context.Context
	cancel context.CancelFunc
	// inFlight holds a token per request being handled (MaxInFlight).
	inFlight chan struct{}
	subs     []*nats.Subscription
	wg       sync.WaitGroup

	mu      sync.Mutex
	scheds  map[string]*sched
	schedMu sync.Mutex // one scheduler started at a time
	decls   map[string]cachedDecl
	types   typeWatch // of the declarations, for pauses (pause.go)
	limits  map[string]*bucket
	changes map[string]*bucket  // of declaration changes, by credential (takeChange)
	bodies  map[string]declBody // the last declaration of each credential's type (declbody.go)
	waiting map[string]int
	uploads map[string]*upload
	// quota counts each tenant's stored result bytes against its result
	// quota; uploads reserve their bytes in it as they arrive (upload.go).
	// runQuota: the broker made it, and reads it from Start until Stop
	// (else Config.ResultQuota's owner does).
	quota    *tenantquota.Tally
	runQuota bool
	// presence holds, per type, the worker names announced within
	// PresenceTTL, so one credential cannot flood the workers bucket.
	presence map[string]map[string]time.Time

	// lost holds, by job key, the claims this broker wrote whose answer
	// it never got (lost.go).
	lostMu sync.Mutex
	lost   map[string]lostClaim

	renewals renewals     // when this broker last renewed each claim's places (flow.go)
	flowKeys keyLocks     // one compare-and-set at a time per rate key in this broker (flow.go)
	places   placeQueues  // the writes of the concurrency places, grouped per key (flowbatch.go)
	tokens   tokenBatches // the rate tokens taken in batches (flowbatch.go)

	stopOnce sync.Once
	stopped  chan struct{} // closed when the first Stop's work is done

	// beforeClaimWrite, set by tests, runs between a claim's read of the
	// record and its compare-and-set.
	beforeClaimWrite func(key string)
	// beforeWrite, set by tests, runs before each compare-and-set of a
	// held job's record.
	beforeWrite func(key string)
	// afterClaimWrite, set by tests, runs after a claim's compare-and-set
	// succeeded; an error it returns stands for the write's lost answer.
	afterClaimWrite func(key string) error
}

type cachedDecl struct {
	d  *job.TypeDecl
	at time.Time
}

// New returns a broker over stores, every field of which is required,
// answering on stores.Conn.
func New(cfg Config, stores Stores, log *slog.Logger) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if err := required.Fields(stores); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	nc := stores.Conn
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Broker{cfg: cfg, stores: stores, nc: nc, inFlight: make(chan struct{}, cfg.MaxInFlight), log: log.With("component", "broker", "host", cfg.Host),
		scheds: map[string]*sched{}, decls: map[string]cachedDecl{}, limits: map[string]*bucket{}, changes: map[string]*bucket{}, bodies: map[string]declBody{},
		waiting: map[string]int{}, uploads: map[string]*upload{},
		presence: map[string]map[string]time.Time{}}
	b.places.b = b
	b.quota = cfg.ResultQuota
	if b.quota == nil {
		q, err := tenantquota.New(tenantquota.Config{MaxBytes: cfg.TenantResultsMaxBytes, Read: stores.Results.TenantUse, Log: b.log})
		if err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		b.quota, b.runQuota = q, true
	}
	return b, nil
}

// Start loads the claim secret and subscribes to the workers' requests. The
// broker runs until Stop; ctx bounds only the start.
func (b *Broker) Start(ctx context.Context) error {
	b.started = b.cfg.Now()
	err := natsjs.UntilAvailable(ctx, opTimeout, func(ctx context.Context) (err error) {
		b.secret, err = b.stores.Secrets.Get(ctx, SecretClaims)
		return err
	})
	if err != nil {
		return fmt.Errorf("broker: claim secret: %w", err)
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if b.runQuota {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.quota.Run(b.ctx) // reads the tenants' stored result bytes until Stop
		}()
	}
	handlers := map[string]func(context.Context, *request) *wire.Reply{
		wire.OpDeclare: b.declare, wire.OpHello: b.hello, wire.OpBye: b.bye, wire.OpNext: b.next,
		wire.OpBeat: b.beat, wire.OpOpen: b.open, wire.OpDone: b.done, wire.OpFail: b.fail, wire.OpGiveBack: b.giveBack,
	}
	for op, h := range handlers {
		sub, err := b.nc.QueueSubscribe(wire.Root+"*.*."+op, QueueGroup, b.serve(op, h))
		if err != nil {
			b.stopWithin(ctx)
			return fmt.Errorf("broker: subscribe %s: %w", op, err)
		}
		_ = sub.SetPendingLimits(64<<10, 256<<20)
		b.subs = append(b.subs, sub)
	}
	if err := b.nc.FlushTimeout(opTimeout); err != nil {
		b.stopWithin(ctx)
		return fmt.Errorf("broker: %w", err)
	}
	b.log.Info("broker started")
	return nil
}

// Stop ends the subscriptions, aborts open uploads and waits, within ctx,
// for the requests under way (their contexts have ended). When ctx ends
// first it returns an error wrapping ctx.Err(), and what is still under
// way ends on its own. It is safe to call more than once, and before or
// without Start.
func (b *Broker) Stop(ctx context.Context) error {
	b.stopOnce.Do(func() {
		b.stopped = make(chan struct{})
		go func() {
			defer close(b.stopped)
			b.stop()
		}()
	})
	if err := startstop.Wait(ctx, b.stopped, nil); err != nil {
		return fmt.Errorf("broker: stop: %w", err)
	}
	return nil
}

// stopWithin undoes a failed Start, within opTimeout of its ctx's values.
func (b *Broker) stopWithin(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	_ = b.Stop(ctx)
}

// stop is the first Stop's work.
func (b *Broker) stop() {
	for _, s := range b.subs {
		_ = s.Unsubscribe()
	}
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Lock()
	uploads := make([]*upload, 0, len(b.uploads))
	for _, u := range b.uploads {
		uploads = append(uploads, u)
	}
	scheds := b.scheds
	b.scheds = map[string]*sched{}
	b.mu.Unlock()
	for _, u := range uploads {
		u.abort(errors.New("broker stopping"))
	}
	b.wg.Wait()
	b.places.stop() // the places given back that wait are written
	for _, s := range scheds {
		s.close()
	}
}

// request is one worker request, its subject checked.
type request struct {
	msg  *nats.Msg
	cred string
	typ  string
	// arrived is when the broker got the request: its asker gives up on
	// the answer some time after (replyBy).
	arrived time.Time
}

// since is when r arrived, or now for a request made in process (tests).
func (r *request) since(now time.Time) time.Time {
	if r.arrived.IsZero() {
		return now
	}
	return r.arrived
}

func (r *request) decode(v any) *wire.Reply {
	if len(r.msg.Data) > wire.MaxRequest {
		return refuse(wire.CodeBadRequest, "request larger than %d bytes", wire.MaxRequest)
	}
	if err := json.Unmarshal(r.msg.Data, v); err != nil {
		return refuse(wire.CodeBadRequest, "malformed request: %v", err)
	}
	return nil
}

func refuse(code, format string, args ...any) *wire.Reply {
	return &wire.Reply{Error: &wire.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

var ok = &wire.Reply{}

// serve runs each request on its own goroutine (a next request waits for
// work) after the credential's rate limit.
func (b *Broker) serve(op string, h func(context.Context, *request) *wire.Reply) nats.MsgHandler {
	return func(m *nats.Msg) {
		if m.Reply == "" {
			return
		}
		cred, typ, _, rest, valid := wire.Parse(m.Subject)
		if !valid || len(rest) != 0 {
			respond(m, refuse(wire.CodeBadRequest, "not a request subject"))
			return
		}
		if !b.allow(cred) {
			respond(m, refuse(wire.CodeThrottled, "too many requests of this credential"))
			return
		}
		select {
		case b.inFlight <- struct{}{}:
		default:
			respond(m, refuse(wire.CodeThrottled, "this broker handles %d requests already", cap(b.inFlight)))
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-b.inFlight }()
			respond(m, h(b.ctx, &request{msg: m, cred: cred, typ: typ, arrived: b.cfg.Now()}))
		}()
	}
}

func respond(m *nats.Msg, r *wire.Reply) {
	data, err := json.Marshal(r)
	if err != nil {
		data = []byte(`{"error":{"code":"bad_request","message":"unencodable reply"}}`)
	}
	_ = m.Respond(data)
}

// token is the fencing token of a job's claim at attempt: the claim's
// identity, signed, so that only the broker that stored the claim could
// have handed it out, and only that attempt's holder presents it.
func (b *Broker) token(key string, attempt int) string {
	m := hmac.New(sha256.New, b.secret)
	m.Write([]byte("jobgate claim v1\x00" + key + "\x00" + strconv.Itoa(attempt)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// declTTL is how long a declaration read from the store is used before it
// is read again (the watch of pause.go replaces it sooner on a change).
const declTTL = 2 * time.Second

// decl returns the declaration of typ as its owner cred may use it: the
// type must be declared, by this credential.
func (b *Broker) decl(ctx context.Context, cred, typ string) (*job.TypeDecl, *wire.Reply) {
	now := b.cfg.Now()
	b.mu.Lock()
	c, hit := b.decls[typ]
	b.mu.Unlock()
	if !hit || now.Sub(c.at) > declTTL {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		d, err := b.stores.Types.Get(octx, typ)
		cancel()
		switch {
		case errors.Is(err, job.ErrNotFound):
			return nil, refuse(wire.CodeUnknown, "type %s is not declared", typ)
		case err != nil:
			return nil, refuse(wire.CodeUnavailable, "type %s could not be read", typ)
		}
		c = cachedDecl{d: d, at: now}
		b.mu.Lock()
		b.decls[typ] = c
		b.mu.Unlock()
	}
	if !owns(c.d, cred) {
		return nil, refuse(wire.CodeForbidden, "type %s belongs to another credential", typ)
	}
	return c.d, nil
}

// owns reports whether cred may run d's jobs.
func owns(d *job.TypeDecl, cred string) bool {
	if cred == wire.JobgateCredential {
		return true
	}
	return d.Owner == cred && !wire.Builtin(d.Name)
}

func (b *Broker) forgetDecl(typ string) {
	b.mu.Lock()
	delete(b.decls, typ)
	b.mu.Unlock()
}

// eventAfter publishes the event of a change the broker wrote (the relay
// fills in for a broker that died before it). after is the sequence of the
// job's newest event as the broker knows it (0: it does not, and the event
// stream is asked); it returns the sequence of the job's newest event now,
// 0 when the publish failed.
func (b *Broker) eventAfter(rec *job.Record, after uint64) uint64 {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), opTimeout)
	defer cancel()
	seq, _, err := b.stores.Events.PublishAfter(ctx, rec, after)
	if err != nil {
		b.log.DebugContext(jobCtx(ctx, rec), "event left to the relay", "job_id", rec.ID, "err", err)
		return 0
	}
	if b.cfg.OnEvent != nil {
		b.cfg.OnEvent(rec.Key(), rec.Revision)
	}
	return seq
}

// schedOf is the type's scheduler if this broker runs one.
func (b *Broker) schedOf(typ string) *sched {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.scheds[typ]
}

// observe reports the end of rec's attempt n (OnAttempt).
func (b *Broker) observe(typ, outcome string, rec *job.Record, n int) {
	if b.cfg.OnAttempt == nil {
		return
	}
	took, known := rec.AttemptTook(n)
	if !known {
		took = -1
	}
	b.cfg.OnAttempt(typ, outcome, took)
}
