package broker

import (
	"context"
	"errors"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/internal/wire"
)

// declare stores the type of the subject for its credential: a built-in
// type only for jobgate's own, a name declared by another credential never.
// The schema is compiled here, with jobgate's bounds, whatever the worker
// checked on its side.
func (b *Broker) declare(ctx context.Context, r *request) *wire.Reply {
	var req wire.DeclareRequest
	if bad := r.decode(&req); bad != nil {
		return bad
	}
	if req.Type.Name != r.typ {
		return refuse(wire.CodeBadRequest, "the declaration names %q, the subject %q", req.Type.Name, r.typ)
	}
	if wire.Builtin(r.typ) && r.cred != wire.JobgateCredential {
		return refuse(wire.CodeForbidden, "%s is a built-in type: only jobgate declares it", r.typ)
	}
	if _, err := schema.Compile(req.Type.Schema); err != nil {
		return refuse(wire.CodeInvalid, "schema of %s: %v", r.typ, err)
	}
	d := &job.TypeDecl{
		Name: req.Type.Name, Description: req.Type.Description, Schema: req.Type.Schema,
		TimeoutSeconds: req.Type.TimeoutSeconds, Attempts: req.Type.Attempts,
		MaxResultBytes: req.Type.MaxResultBytes, ContentType: req.Type.ContentType,
		DeclaredAt: b.cfg.Now().UTC(), Owner: r.cred,
	}
	if err := d.Validate(); err != nil {
		return refuse(wire.CodeInvalid, "%v", err)
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err := b.stores.Types.DeclareOwned(octx, d)
	b.forgetDecl(r.typ)
	switch {
	case errors.Is(err, natsjs.ErrOwned):
		b.log.Warn("declaration refused: the type belongs to another credential", "type", r.typ, "credential", r.cred)
		return refuse(wire.CodeForbidden, "type %s belongs to another credential", r.typ)
	case errors.Is(err, job.ErrInvalidType):
		return refuse(wire.CodeInvalid, "%v", err)
	case err != nil:
		return refuse(wire.CodeUnavailable, "the type could not be stored")
	}
	b.log.Info("type declared", "type", r.typ, "credential", r.cred, "worker", req.Worker)
	return ok
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
