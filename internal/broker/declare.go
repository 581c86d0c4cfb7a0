package broker

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/schemapool"
	"github.com/jobgate/jobgate/internal/wire"
)

// declare stores the type of the subject for its credential: a built-in
// type only for jobgate's own, a name declared by another credential never.
// The schema is compiled here, with jobgate's bounds, whatever the worker
// checked on its side. Compiling costs a core for tens of milliseconds (it
// took 250 ms before the bounds of issue 34), so declarations are cheap
// to repeat and to flood: a declaration identical to the stored one
// (schemapool.DeclKey) is answered at once with nothing compiled or
// written (when it comes again in the bytes of the type's last one,
// without even being decoded); any other takes one of its credential's
// changes (Config.DeclareBurst) before it is decoded, given back unless
// it turns out a change that was compiled, so that a flood past the
// bucket costs a hash a request; a change is compiled in the process's
// bounded pool (Config.Schemas), and the stored version serves until the
// new one is stored.
func (b *Broker) declare(ctx context.Context, r *request) *wire.Reply {
	sum := sha256.Sum256(r.msg.Data)
	repeat, known := b.repeated(r, sum)
	if repeat {
		return b.unchanged(r, "")
	}
	free := r.cred == wire.JobgateCredential
	charged, spent := false, false
	charge := func() *wire.Reply {
		if free || charged {
			return nil
		}
		wait, allowed := b.takeChange(r.cred)
		if !allowed {
			return b.tooOften(r, wait)
		}
		charged = true
		return nil
	}
	defer func() {
		if charged && !spent {
			b.giveChange(r.cred)
		}
	}()
	if !known {
		if refused := charge(); refused != nil {
			return refused
		}
	}
	var req wire.DeclareRequest
	if bad := r.decode(&req); bad != nil {
		return bad
	}
	if !wire.ValidWorkerName(req.Worker) {
		// As hello and next check it: the log line names the worker.
		return refuse(wire.CodeBadRequest, "worker must match [A-Za-z0-9_.:@-]{1,128}")
	}
	if req.Type.Name != r.typ {
		return refuse(wire.CodeBadRequest, "the declaration names %q, the subject %q", req.Type.Name, r.typ)
	}
	if wire.Builtin(r.typ) && !free {
		return refuse(wire.CodeForbidden, "%s is a built-in type: only jobgate declares it", r.typ)
	}
	d := &job.TypeDecl{
		Name: req.Type.Name, Description: req.Type.Description, Schema: req.Type.Schema,
		TimeoutSeconds: req.Type.TimeoutSeconds, Attempts: req.Type.Attempts,
		MaxResultBytes: req.Type.MaxResultBytes, ContentType: req.Type.ContentType, Owner: r.cred,
		Flow: req.Type.Flow,
	}
	if err := d.Validate(); err != nil {
		return refuse(wire.CodeInvalid, "%v", err)
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	stored, err := b.stores.Types.Get(octx, r.typ)
	switch {
	case errors.Is(err, job.ErrNotFound):
		stored = nil
	case err != nil:
		return refuse(wire.CodeUnavailable, "type %s could not be read", r.typ)
	case stored.Owner != "" && stored.Owner != r.cred:
		return b.squatted(r)
	default:
		b.mu.Lock()
		b.decls[r.typ] = cachedDecl{d: stored, at: b.cfg.Now()}
		b.mu.Unlock()
	}
	if stored != nil && stored.Owner == r.cred && schemapool.DeclKey(stored) == schemapool.DeclKey(d) {
		b.rememberBody(r, sum, schemapool.DeclKey(d))
		return b.unchanged(r, req.Worker)
	}
	if stored != nil { // a change: the bytes of an older version count too
		if refused := charge(); refused != nil {
			return refused
		}
	}
	cctx, ccancel := context.WithTimeout(ctx, b.cfg.CompileWait)
	_, err = b.cfg.Schemas.Compile(cctx, req.Type.Schema)
	ccancel()
	if errors.Is(err, schemapool.ErrBusy) {
		return throttled(time.Second, "the schema compiler is busy with other declarations")
	}
	spent = stored != nil // a type's first declaration is free
	if err != nil {
		return refuse(wire.CodeInvalid, "schema of %s: %v", r.typ, err)
	}
	d.DeclaredAt = b.cfg.Now().UTC()
	err = b.stores.Types.DeclareOwned(octx, d)
	b.forgetDecl(r.typ)
	switch {
	case errors.Is(err, natsjs.ErrOwned):
		return b.squatted(r)
	case errors.Is(err, job.ErrInvalidType):
		return refuse(wire.CodeInvalid, "%v", err)
	case err != nil:
		return refuse(wire.CodeUnavailable, "the type could not be stored")
	}
	b.rememberBody(r, sum, schemapool.DeclKey(d))
	b.log.Info("type declared", "type", r.typ, "credential", r.cred, "worker", req.Worker)
	return ok
}

// tooOften refuses a change past the credential's bucket.
func (b *Broker) tooOften(r *request, wait time.Duration) *wire.Reply {
	level := slog.LevelDebug
	if b.warnChange(r.cred) { // once a DeclareEvery: a flood is not a flood of lines
		level = slog.LevelWarn
	}
	b.log.Log(context.Background(), level, "declaration refused: its credential changes its declarations too often",
		"type", r.typ, "credential", r.cred, "retry_after", wait)
	return throttled(wait, "this credential changes its declarations too often (at most %d at once, then one every %s)",
		b.cfg.DeclareBurst, b.cfg.DeclareEvery)
}

// unchanged answers a declaration identical to the stored one.
func (b *Broker) unchanged(r *request, worker string) *wire.Reply {
	b.log.Debug("type declared again, unchanged", "type", r.typ, "credential", r.cred, "worker", worker)
	return ok
}

// squatted refuses a declaration of another credential's type.
func (b *Broker) squatted(r *request) *wire.Reply {
	b.log.Warn("declaration refused: the type belongs to another credential", "type", r.typ, "credential", r.cred)
	return refuse(wire.CodeForbidden, "type %s belongs to another credential", r.typ)
}

// throttled refuses a request for now, saying how long to wait (rounded
// up to the millisecond, at least one).
func throttled(wait time.Duration, format string, args ...any) *wire.Reply {
	r := refuse(wire.CodeThrottled, format, args...)
	r.Error.RetryAfterMS = max(1, (wait + time.Millisecond - 1).Milliseconds())
	return r
}

// hello records a process as serving the type.
func (b *Broker) hello(ctx context.Context, r *request) *wire.Reply {
	var req wire.HelloRequest
	if bad := r.decode(&req); bad != nil {
		return bad
	}
	if !wire.ValidWorkerName(req.Worker) || req.Concurrency < 1 || req.Concurrency > 1024 ||
		(req.Busy != nil && (*req.Busy < 0 || *req.Busy > wire.MaxBusy)) {
		return refuse(wire.CodeBadRequest, "worker must match [A-Za-z0-9_.:@-]{1,128}, concurrency be 1 to 1024 and busy 0 to %d", wire.MaxBusy)
	}
	if _, bad := b.decl(ctx, r.cred, r.typ); bad != nil {
		return bad
	}
	now := b.cfg.Now().UTC()
	if !b.announce(r.typ, req.Worker, now) {
		return refuse(wire.CodeThrottled, "more than %d worker processes of %s announced", b.cfg.MaxWorkers, r.typ)
	}
	started := req.StartedAt.UTC()
	if started.After(now) || started.IsZero() {
		started = now
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err := b.stores.Types.Announce(octx, natsjs.Presence{Worker: req.Worker, Type: r.typ, Concurrency: req.Concurrency,
		StartedAt: started, SeenAt: now, Credential: r.cred, Busy: req.Busy})
	if err != nil {
		return refuse(wire.CodeUnavailable, "presence not stored")
	}
	return ok
}

// bye removes a process's presence.
func (b *Broker) bye(ctx context.Context, r *request) *wire.Reply {
	var req wire.HelloRequest
	if bad := r.decode(&req); bad != nil {
		return bad
	}
	if !wire.ValidWorkerName(req.Worker) {
		return refuse(wire.CodeBadRequest, "worker must match [A-Za-z0-9_.:@-]{1,128}")
	}
	if _, bad := b.decl(ctx, r.cred, r.typ); bad != nil {
		return bad
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_ = b.stores.Types.Withdraw(octx, r.typ, req.Worker)
	return ok
}

// beatLimit is the shortest time between two beats the broker writes for
// one job: more frequent beats are answered without a write.
func (b *Broker) beatLimit() time.Duration { return b.cfg.BeatInterval / 5 }

// announce notes a worker process of typ as live; false when the type has
// MaxWorkers others live already.
func (b *Broker) announce(typ, worker string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := b.presence[typ]
	if seen == nil {
		seen = map[string]time.Time{}
		b.presence[typ] = seen
	}
	if _, known := seen[worker]; !known && len(seen) >= b.cfg.MaxWorkers {
		for name, at := range seen {
			if now.Sub(at) > natsjs.PresenceTTL {
				delete(seen, name)
			}
		}
		if len(seen) >= b.cfg.MaxWorkers {
			return false
		}
	}
	seen[worker] = now
	return true
}
