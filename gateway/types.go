package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/pkg/job"
)

// typeSource is where the declared job types and the live workers are
// (natsjs.TypeStore).
type typeSource interface {
	WatchTypes(ctx context.Context, fn func(*natsjs.TypeChange)) error
	WatchWorkers(ctx context.Context, fn func(key string, p *natsjs.Presence)) error
}

// typesLoadTimeout bounds the first load of the declarations at start.
const typesLoadTimeout = 30 * time.Second

// typeRegistry is the gateway's live view of the declared job types: one
// watch of the declarations feeds the compiled schemas every submission is
// validated against, one watch of the workers' presence counts who runs
// each type. A type declared by a worker that starts after the gateway is
// accepted as soon as the watch delivers it, without a restart.
type typeRegistry struct {
	src     typeSource
	log     *slog.Logger
	schemas *schema.Registry

	mu      sync.RWMutex
	decls   map[string]*job.TypeDecl
	workers map[string]natsjs.Presence // by presence key
	cancel  context.CancelFunc

	// gen counts changes of the schemas; it moves after a change is in
	// place, so a bodyProof made under one generation never vouches for a
	// decode under another schema.
	gen atomic.Uint64
}

func newTypeRegistry(src typeSource, log *slog.Logger) *typeRegistry {
	return &typeRegistry{src: src, log: log, schemas: schema.NewRegistry(),
		decls: map[string]*job.TypeDecl{}, workers: map[string]natsjs.Presence{}}
}

// start begins both watches and returns once the current declarations are
// loaded (a gateway that starts after its workers accepts their types at
// once).
func (t *typeRegistry) start(ctx context.Context) error {
	if t.src == nil {
		return errors.New("no type source")
	}
	t.mu.Lock()
	if t.cancel != nil {
		t.mu.Unlock()
		return nil
	}
	wctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	t.mu.Unlock()
	loaded := make(chan struct{})
	var once sync.Once
	// Bounded: a gateway that cannot load the declarations says so
	// instead of waiting for ever; within the bound, a watch that could
	// not start (a cluster electing a leader answers "JetStream system
	// temporarily unavailable") is tried again, with jitter.
	deadline := time.Now().Add(typesLoadTimeout)
	err := retryUntil(ctx, deadline, func() error {
		return t.src.WatchTypes(wctx, func(c *natsjs.TypeChange) {
			switch {
			case c == nil:
				once.Do(func() { close(loaded) })
			case c.Decl != nil:
				t.declare(c.Decl)
			default:
				t.remove(c.Removed)
			}
		})
	})
	if err == nil {
		err = retryUntil(ctx, deadline, func() error { return t.src.WatchWorkers(wctx, t.presence) })
	}
	if err != nil {
		cancel()
		return err
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-loaded:
		return nil
	case <-timer.C:
		cancel()
		return fmt.Errorf("the declared types did not load within %s", typesLoadTimeout)
	case <-ctx.Done():
		cancel()
		return ctx.Err()
	}
}

// retryUntil runs op until it succeeds, ctx ends or the deadline passes
// (then the last error), with jittered waits from 100ms doubling to 2s.
func retryUntil(ctx context.Context, deadline time.Time, op func() error) error {
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return retry.Until(dctx, retry.Policy{First: 100 * time.Millisecond, Limit: 2 * time.Second},
		func(context.Context) error { return op() })
}

func (t *typeRegistry) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
	}
}

// declare compiles a declaration's schema and makes the type acceptable. A
// schema this gateway cannot compile keeps the type's previous version (the
// worker package compiles schemas before declaring, so this means a worker
// of another version).
func (t *typeRegistry) declare(d *job.TypeDecl) {
	s, err := schema.Compile(d.Schema)
	if err != nil {
		t.log.Error("job type declared with a schema this gateway cannot use; keeping its previous version",
			"type", d.Name, "err", err)
		return
	}
	t.mu.Lock()
	if _, known := t.decls[d.Name]; !known && len(t.decls) >= job.MaxTypes {
		t.mu.Unlock()
		t.log.Error("job type refused: the deployment holds the most types a gateway keeps", "type", d.Name, "max", job.MaxTypes)
		return
	}
	t.decls[d.Name] = d
	t.mu.Unlock()
	t.schemas.Set(d.Name, s)
	t.gen.Add(1)
	t.log.Info("job type accepted", "type", d.Name, "attempts", d.Attempts, "timeout_seconds", d.TimeoutSeconds)
}

func (t *typeRegistry) remove(name string) {
	t.schemas.Delete(name)
	t.gen.Add(1)
	t.mu.Lock()
	delete(t.decls, name)
	t.mu.Unlock()
	t.log.Info("job type removed", "type", name)
}

func (t *typeRegistry) presence(key string, p *natsjs.Presence) {
	if key == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p == nil || p.SeenAt.IsZero() {
		delete(t.workers, key)
		return
	}
	t.workers[key] = *p
}

// decl returns a type's declaration.
func (t *typeRegistry) decl(name string) (*job.TypeDecl, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	d, ok := t.decls[name]
	return d, ok
}

// typeInfo is one entry of GET /v1/types.
type typeInfo struct {
	*job.TypeDecl
	// Workers counts the worker processes that announced the type within
	// the presence lifetime.
	Workers int `json:"workers"`
}

// list returns every declared type with its live worker count, by name.
func (t *typeRegistry) list(now time.Time) []typeInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	live := map[string]int{}
	for key, p := range t.workers {
		// An expired presence whose removal the watch has not delivered
		// yet does not count.
		if now.Sub(p.SeenAt) <= natsjs.PresenceTTL {
			live[strings.SplitN(key, ".", 2)[0]]++
		}
	}
	out := make([]typeInfo, 0, len(t.decls))
	for _, d := range t.decls {
		out = append(out, typeInfo{TypeDecl: d, Workers: live[d.Name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// listTypes is GET /v1/types: the declared job types with their params
// schemas (a web app can build its form from one) and how many workers run
// each right now. A type with no live worker still accepts jobs; they wait,
// queued, until a worker of the type starts.
func (g *Gateway) listTypes(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "private, no-cache")
	return c.JSON(fiber.Map{"types": g.types.list(g.cfg.Now())})
}
