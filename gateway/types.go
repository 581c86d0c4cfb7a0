package gateway

import (
	"context"
	"encoding/base64"
	"fmt"
	"github.com/jobgate/jobgate/internal/wire"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/internal/schemapool"
)

// typeSource is where the declared job types and the live workers are
// (natsjs.TypeStore).
type typeSource interface {
	WatchTypes(ctx context.Context, fn func(*natsjs.TypeChange)) error
	WatchWorkers(ctx context.Context, fn func(key string, p *natsjs.Presence)) error
}

// storedTypeSource is a typeSource that also tells when the server stored
// each declaration (natsjs.TypeStore); the first load orders the
// declarations by it.
type storedTypeSource interface {
	WatchTypesStored(ctx context.Context, fn func(*natsjs.StoredTypeChange)) error
}

// typesLoadTimeout bounds the first load of the declarations at start.
const typesLoadTimeout = 30 * time.Second

// maxTypeBytes is the byte budget of the type table: the declared bytes
// (schema and description) of all the types a gateway keeps, beside the
// count job.MaxTypes. A declaration past either is refused (logged as a
// warning, not listed, its submissions answer 422 as for an unknown type),
// except a built-in type (wire.Builtin), which is never refused. The first
// load takes the built-in types first, then the others in the order they
// were declared (the time the server stored the declaration, then the
// name), so declarations made after a table is full can never crowd out
// the ones before them, and a restart keeps the same types. A refused
// type is taken when it is declared again with room in the table, or at
// the next start.
const maxTypeBytes = 4 << 20

// typeRegistry is the gateway's live view of the declared job types: one
// watch of the declarations feeds the compiled schemas every submission is
// validated against, one watch of the workers' presence counts who runs
// each type. A type declared by a worker that starts after the gateway is
// accepted as soon as the watch delivers it, without a restart.
type typeRegistry struct {
	src     typeSource
	log     *slog.Logger
	schemas *schema.Registry
	pool    *schemapool.Pool // compiles the schemas: schemapool.Default (tests set another, under mu)

	mu      sync.RWMutex
	decls   map[string]*job.TypeDecl
	keys    map[string]schemapool.Key // of decls, as compiled (declare)
	bytes   int                       // declared bytes of decls (declBytes)
	loading bool                      // the first load: declarations wait in pending until the watch caught up
	pending map[string]pendingDecl
	workers map[string]natsjs.Presence // by presence key
	cancel  context.CancelFunc

	// gen counts changes of the schemas; it moves after a change is in
	// place, so a bodyProof made under one generation never vouches for a
	// decode under another schema.
	gen atomic.Uint64
}

func newTypeRegistry(src typeSource, log *slog.Logger) *typeRegistry {
	return &typeRegistry{src: src, log: log, schemas: schema.NewRegistry(), pool: schemapool.Default,
		decls: map[string]*job.TypeDecl{}, keys: map[string]schemapool.Key{}, workers: map[string]natsjs.Presence{}}
}

// start begins both watches, on run's values until stop, and returns once
// the current declarations are loaded within ctx (a gateway that starts
// after its workers accepts their types at once).
func (t *typeRegistry) start(ctx, run context.Context) error {
	t.mu.Lock()
	if t.cancel != nil {
		t.mu.Unlock()
		return nil
	}
	wctx, cancel := context.WithCancel(run)
	t.cancel = cancel
	t.loading, t.pending = true, map[string]pendingDecl{}
	t.mu.Unlock()
	loaded := make(chan struct{})
	var once sync.Once
	change := func(c *natsjs.TypeChange, stored time.Time) {
		switch {
		case c == nil:
			t.caughtUp()
			once.Do(func() { close(loaded) })
		case c.Decl != nil:
			t.declareStored(c.Decl, stored)
		default:
			t.remove(c.Removed)
		}
	}
	// Bounded: a gateway that cannot load the declarations says so
	// instead of waiting for ever; within the bound, a watch that could
	// not start (a cluster electing a leader answers "JetStream system
	// temporarily unavailable") is tried again, with jitter.
	deadline := time.Now().Add(typesLoadTimeout)
	err := retryUntil(ctx, deadline, func() error {
		if ss, ok := t.src.(storedTypeSource); ok {
			return ss.WatchTypesStored(wctx, func(c *natsjs.StoredTypeChange) {
				if c == nil {
					change(nil, time.Time{})
				} else {
					change(&c.TypeChange, c.Stored)
				}
			})
		}
		return t.src.WatchTypes(wctx, func(c *natsjs.TypeChange) {
			var stored time.Time
			if c != nil && c.Decl != nil {
				stored = c.Decl.DeclaredAt
			}
			change(c, stored)
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

// pendingDecl is a declaration of the first load, with the time it was
// stored.
type pendingDecl struct {
	decl   *job.TypeDecl
	stored time.Time
}

// declBytes is what a declaration costs the type table's byte budget.
func declBytes(d *job.TypeDecl) int { return len(d.Schema) + len(d.Description) }

// declareStored takes a declaration from the watch: during the first load
// it waits for the others (caughtUp orders them), after it is declared at
// once.
func (t *typeRegistry) declareStored(d *job.TypeDecl, stored time.Time) {
	t.mu.Lock()
	if t.loading {
		t.pending[d.Name] = pendingDecl{decl: d, stored: stored}
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.declare(d)
}

// caughtUp ends the first load: the built-in types first, then the others
// by the time they were stored, then by name (see maxTypeBytes).
func (t *typeRegistry) caughtUp() {
	t.mu.Lock()
	if !t.loading {
		t.mu.Unlock()
		return
	}
	pending := make([]pendingDecl, 0, len(t.pending))
	for _, p := range t.pending {
		pending = append(pending, p)
	}
	t.loading, t.pending = false, nil
	t.mu.Unlock()
	sort.Slice(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if ab, bb := wire.Builtin(a.decl.Name), wire.Builtin(b.decl.Name); ab != bb {
			return ab
		}
		if !a.stored.Equal(b.stored) {
			return a.stored.Before(b.stored)
		}
		return a.decl.Name < b.decl.Name
	})
	for _, p := range pending {
		t.declare(p.decl)
	}
}

// room reports why the table has no room for d (the count or the byte
// budget), or "" if it has. Built-in types always have room. Called with
// t.mu held.
func (t *typeRegistry) room(d *job.TypeDecl) string {
	if wire.Builtin(d.Name) {
		return ""
	}
	old, known := t.decls[d.Name]
	if !known && len(t.decls) >= job.MaxTypes {
		return "count"
	}
	bytes := t.bytes + declBytes(d)
	if known {
		bytes -= declBytes(old)
	}
	if bytes > maxTypeBytes {
		return "bytes"
	}
	return ""
}

// declare compiles a declaration's schema and makes the type acceptable,
// if the type table has room for it (see maxTypeBytes). A schema this
// gateway cannot compile, or a new version the table has no room for,
// keeps the type's previous version (the worker package compiles schemas
// before declaring, so the first means a worker of another version, or one
// not written with it). A declaration whose key (schemapool.DeclKey) is the
// one compiled already (an operator's pause changes only the record)
// compiles nothing; a new one is compiled in the process's bounded pool
// (shared with the broker of a serve process, which compiled it a moment
// ago), and until it is ready the previous version serves the
// submissions.
func (t *typeRegistry) declare(d *job.TypeDecl) {
	key := schemapool.DeclKey(d)
	t.mu.RLock()
	full := t.room(d)
	_, known := t.decls[d.Name]
	same := known && t.keys[d.Name] == key
	pool := t.pool
	t.mu.RUnlock()
	if full != "" { // before compiling: a refused declaration costs no more
		t.refused(d, full)
		return
	}
	if same {
		t.mu.Lock()
		if old, known := t.decls[d.Name]; known && t.keys[d.Name] == key {
			t.bytes += declBytes(d) - declBytes(old) // another spelling may be longer ("3.0")
			t.decls[d.Name] = d
		}
		t.mu.Unlock()
		t.log.Debug("job type declared again, unchanged", "type", d.Name)
		return
	}
	s, err := pool.Compile(context.Background(), d.Schema)
	if err != nil {
		t.log.Error("job type declared with a schema this gateway cannot use; keeping its previous version",
			"type", d.Name, "err", err)
		return
	}
	t.mu.Lock()
	if full = t.room(d); full != "" {
		t.mu.Unlock()
		t.refused(d, full)
		return
	}
	if old, known := t.decls[d.Name]; known {
		t.bytes -= declBytes(old)
	}
	t.decls[d.Name] = d
	t.keys[d.Name] = key
	t.bytes += declBytes(d)
	t.mu.Unlock()
	t.schemas.Set(d.Name, s)
	t.gen.Add(1)
	t.log.Info("job type accepted", "type", d.Name, "attempts", d.Attempts, "timeout_seconds", d.TimeoutSeconds)
}

func (t *typeRegistry) refused(d *job.TypeDecl, full string) {
	_, known := t.decl(d.Name)
	msg := "job type refused: the type table is full"
	if known {
		msg = "new version of a job type refused: the type table is full; keeping its previous version"
	}
	switch full {
	case "count":
		t.log.Warn(msg, "type", d.Name, "max_types", job.MaxTypes)
	default:
		t.log.Warn(msg, "type", d.Name, "declared_bytes", declBytes(d), "max_bytes", maxTypeBytes)
	}
}

func (t *typeRegistry) remove(name string) {
	t.mu.Lock()
	if t.loading {
		delete(t.pending, name)
		t.mu.Unlock()
		return
	}
	_, known := t.decls[name]
	t.mu.Unlock()
	// The schema goes first: no submission validated against it finds
	// the declaration gone.
	t.schemas.Delete(name)
	t.gen.Add(1)
	t.mu.Lock()
	if old, ok := t.decls[name]; ok {
		t.bytes -= declBytes(old)
		delete(t.decls, name)
		delete(t.keys, name)
	}
	t.mu.Unlock()
	if known {
		t.log.Info("job type removed", "type", name)
	}
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

// typeInfo is GET /v1/types/{name}: a declaration with its schema.
type typeInfo struct {
	*job.TypeDecl
	// Owner hides the declaring credential's id: which credential runs a
	// type is the operator's business, not every caller's.
	Owner string `json:"owner,omitempty"`
	// Workers counts the worker processes that announced the type within
	// the presence lifetime.
	Workers int `json:"workers"`
	// Paused is an operator's pause: jobs are admitted and wait queued.
	Paused bool `json:"paused"`
	// Endpoint hides the declaration's endpoint URL behind its host
	// (gateway/type_endpoint.go).
	Endpoint *endpointSummary `json:"endpoint,omitempty"`
}

// typeSummary is one entry of GET /v1/types: a declaration without its
// schema, which GET /v1/types/{name} gives.
type typeSummary struct {
	Name           string           `json:"name"`
	Description    string           `json:"description,omitempty"`
	TimeoutSeconds int              `json:"timeout_seconds"`
	Attempts       int              `json:"attempts"`
	MaxResultBytes int64            `json:"max_result_bytes"`
	ContentType    string           `json:"content_type"`
	DeclaredAt     time.Time        `json:"declared_at"`
	SchemaBytes    int              `json:"schema_bytes"`
	Workers        int              `json:"workers"`
	Paused         bool             `json:"paused"`
	Endpoint       *endpointSummary `json:"endpoint,omitempty"`
	Links          typeLinks        `json:"links"`
}

type typeLinks struct {
	Self string `json:"self"`
}

// typePage is the body of GET /v1/types.
type typePage struct {
	Types      []typeSummary `json:"types"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// Pages of GET /v1/types.
const (
	typePageDefault = 50
	typePageMax     = 200
)

// liveWorkers counts the live workers of each type. Called with t.mu held.
func (t *typeRegistry) liveWorkers(now time.Time) map[string]int {
	live := map[string]int{}
	for key, p := range t.workers {
		// An expired presence whose removal the watch has not delivered
		// yet does not count.
		if now.Sub(p.SeenAt) <= natsjs.PresenceTTL {
			live[strings.SplitN(key, ".", 2)[0]]++
		}
	}
	return live
}

// list returns every declared type with its live worker count, by name.
func (t *typeRegistry) list(now time.Time) []typeInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	live := t.liveWorkers(now)
	out := make([]typeInfo, 0, len(t.decls))
	for _, d := range t.decls {
		out = append(out, typeInfo{TypeDecl: d, Workers: live[d.Name], Paused: d.Paused, Endpoint: summarizeEndpoint(d)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// info returns one declared type with its live worker count.
func (t *typeRegistry) info(name string, now time.Time) (typeInfo, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	d, ok := t.decls[name]
	if !ok {
		return typeInfo{}, false
	}
	return typeInfo{TypeDecl: d, Workers: t.liveWorkers(now)[name], Paused: d.Paused, Endpoint: summarizeEndpoint(d)}, true
}

// page returns up to limit types whose names sort after after, by name,
// and whether more follow.
func (t *typeRegistry) page(now time.Time, after string, limit int) ([]typeSummary, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	names := make([]string, 0, len(t.decls))
	for name := range t.decls {
		if name > after {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	more := len(names) > limit
	if more {
		names = names[:limit]
	}
	live := t.liveWorkers(now)
	out := make([]typeSummary, len(names))
	for i, name := range names {
		d := t.decls[name]
		out[i] = typeSummary{
			Name: d.Name, Description: d.Description, TimeoutSeconds: d.TimeoutSeconds, Attempts: d.Attempts,
			MaxResultBytes: d.MaxResultBytes, ContentType: d.ContentType, DeclaredAt: d.DeclaredAt,
			SchemaBytes: len(d.Schema), Workers: live[name], Paused: d.Paused, Links: typeLinks{Self: "/v1/types/" + name},
			Endpoint: summarizeEndpoint(d),
		}
	}
	return out, more
}

// A cursor of GET /v1/types is the last name of the page, encoded.
const typeCursorPrefix = "t1."

func typeCursor(name string) string {
	return typeCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(name))
}

func decodeTypeCursor(s string) (string, error) {
	raw, ok := strings.CutPrefix(s, typeCursorPrefix)
	name, err := base64.RawURLEncoding.DecodeString(raw)
	if !ok || err != nil || !job.ValidTypeName(string(name)) {
		return "", fmt.Errorf("%w: cursor is not a next_cursor this API gave", errBadQuery)
	}
	return string(name), nil
}

// listTypes is GET /v1/types: a page of the declared job types, by name,
// with how many workers run each right now, without their params schemas
// (GET /v1/types/{name} has a type's schema, from which a web app can build
// its form). A type with no live worker still accepts jobs; they wait,
// queued, until a worker of the type starts.
func (g *Gateway) listTypes(c *fiber.Ctx) error {
	limit := typePageDefault
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > typePageMax {
			return writeProblem(c, fmt.Errorf("%w: limit must be 1 to %d", errBadQuery, typePageMax))
		}
		limit = n
	}
	var after string
	if s := c.Query("cursor"); s != "" {
		var err error
		if after, err = decodeTypeCursor(s); err != nil {
			return writeProblem(c, err)
		}
	}
	items, more := g.types.page(g.cfg.Now(), after, limit)
	page := typePage{Types: items}
	if more {
		page.NextCursor = typeCursor(items[len(items)-1].Name)
	}
	c.Set(fiber.HeaderCacheControl, "private, no-cache")
	return c.JSON(page)
}

// getType is GET /v1/types/{name}: one declared type with its params
// schema; 404 for a type this gateway does not accept (never declared,
// removed, or refused for want of room in the type table).
func (g *Gateway) getType(c *fiber.Ctx) error {
	info, ok := g.types.info(c.Params("name"), g.cfg.Now())
	if !ok {
		return writeProblem(c, job.ErrNotFound)
	}
	c.Set(fiber.HeaderCacheControl, "private, no-cache")
	return c.JSON(info)
}
