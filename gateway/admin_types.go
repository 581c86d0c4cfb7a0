package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
)

// The operator's endpoints of the job types and the workers (admin API):
// pause and resume a type (on its stored declaration, which every broker
// and gateway watches), delete a type no job of which is open, and list the
// live worker processes from the presence they announce.

// typeAdmin is what these endpoints need of the type store
// (natsjs.TypeStore).
type typeAdmin interface {
	SetPaused(ctx context.Context, name string, paused bool) (*job.TypeDecl, error)
	DeleteType(ctx context.Context, name string, check func(*job.TypeDecl) error) error
}

// adminTypeRoutes adds the operator's type and worker routes under the
// admin group's checks (adminRole, the read limit), each for operators
// only.
func (g *Gateway) adminTypeRoutes(v1 fiber.Router) {
	v1.Post("/admin/types/:name/pause", g.operatorRole, g.adminPauseType(true))
	v1.Post("/admin/types/:name/resume", g.operatorRole, g.adminPauseType(false))
	v1.Delete("/admin/types/:name", g.operatorRole, g.adminDeleteType)
	v1.Get("/admin/workers", g.operatorRole, g.adminWorkers)
	v1.Get("/admin/types", g.operatorRole, g.adminListTypes)
}

// operatorRole lets through operators only.
func (g *Gateway) operatorRole(c *fiber.Ctx) error {
	if !identity(c).Operator {
		return writeProblem(c, job.Userf(job.ErrForbidden, "the job types and the workers are the operator's: this needs an operator token"))
	}
	return c.Next()
}

func (g *Gateway) typeStore() (typeAdmin, error) {
	if a, ok := g.types.src.(typeAdmin); ok {
		return a, nil
	}
	return nil, fmt.Errorf("%w: this gateway cannot change the job types", job.ErrUnavailable)
}

// typeName is the {name} of a type path: a legal name, or not found.
func typeName(c *fiber.Ctx) (string, error) {
	name := c.Params("name")
	if !job.ValidTypeName(name) {
		return "", job.Userf(job.ErrNotFound, "no job type of that name is declared")
	}
	return strings.Clone(name), nil
}

// adminPauseType is POST /v1/admin/types/{name}/pause (paused) and
// /resume: the type's jobs are admitted and wait queued while it is
// paused; a job already running goes on. Both are idempotent.
func (g *Gateway) adminPauseType(paused bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		name, err := typeName(c)
		if err != nil {
			return writeProblem(c, err)
		}
		store, err := g.typeStore()
		if err != nil {
			return writeProblem(c, err)
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout)
		defer cancel()
		d, err := store.SetPaused(ctx, name, paused)
		if err != nil {
			return writeProblem(c, typeStoreErr(name, err))
		}
		g.log.Info("job type paused or resumed by an operator", "type", name, "paused", d.Paused, "by", identity(c).Requester)
		return g.writeAdmin(c, http.StatusOK, api.AdminTypeState{Name: d.Name, Paused: d.Paused})
	}
}

// adminDeleteType is DELETE /v1/admin/types/{name}: 409 type-in-use while
// any of its jobs is queued or running (waiting to retry counts), by the
// query index caught up with every change stored before the call; a
// built-in type is never deleted (403). Then the type is gone from every
// gateway within moments (admission answers 422 for it) and its name is
// free for any credential to declare.
func (g *Gateway) adminDeleteType(c *fiber.Ctx) error {
	name, err := typeName(c)
	if err != nil {
		return writeProblem(c, err)
	}
	if wire.Builtin(name) {
		return writeProblem(c, job.Userf(job.ErrForbidden, "%s is a built-in type: it cannot be deleted", name))
	}
	store, err := g.typeStore()
	if err != nil {
		return writeProblem(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout+adminIndexWait)
	defer cancel()
	err = store.DeleteType(ctx, name, func(*job.TypeDecl) error {
		// Caught up after the declaration was read: a job admitted before
		// that read is counted.
		x, err := g.adminIndex(ctx)
		if err != nil {
			return err
		}
		open, err := openJobs(x, name, g.cfg.Now())
		if err != nil {
			return err
		}
		if open > 0 {
			return job.Userf(api.ErrTypeInUse, "%d jobs of %s are queued or running: cancel them or let them end, then delete the type", open, name)
		}
		return nil
	})
	if err != nil {
		return writeProblem(c, typeStoreErr(name, err))
	}
	g.forgetEndpointKeys(ctx, name)
	g.log.Info("job type deleted by an operator", "type", name, "by", identity(c).Requester)
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.SendStatus(http.StatusNoContent)
}

// openJobs counts a type's jobs queued, running or waiting to retry, over
// every tenant.
func openJobs(x queryIndex, name string, now time.Time) (int64, error) {
	stats, err := x.Stats("", now)
	if err != nil {
		return 0, err
	}
	for _, s := range stats {
		if s.Type == name {
			return s.Queued + s.Running + s.Retrying, nil
		}
	}
	return 0, nil
}

// typeStoreErr: a type changed meanwhile is worth another try.
func typeStoreErr(name string, err error) error {
	switch {
	case errors.Is(err, job.ErrNotFound):
		return job.Userf(job.ErrNotFound, "no job type %s is declared", name)
	case errors.Is(err, natsjs.ErrStale):
		return fmt.Errorf("%w: %w", job.ErrUnavailable, err)
	}
	return err
}

var workersParams = map[string]bool{"limit": true, "cursor": true}

// A cursor of GET /v1/admin/workers is the last process of the page.
const workerCursorPrefix = "w1."

func workerCursor(w *api.AdminWorker) string {
	return workerCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(w.Credential+"\x00"+w.Worker))
}

// adminWorkers is GET /v1/admin/workers: the live worker processes, by
// credential then name, a page at a time, from the presence this gateway
// watches (each process's types, slots, busy slots, last hello). Its cost
// grows with the live presence entries (at most one per type and process),
// never with the jobs.
func (g *Gateway) adminWorkers(c *fiber.Ctx) error {
	if err := checkParams(c, workersParams, "GET /v1/admin/workers"); err != nil {
		return writeProblem(c, err)
	}
	limit := api.DefaultWorkerPage
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > api.MaxWorkerPage {
			return writeProblem(c, job.Userf(errBadQuery, "limit must be 1 to %d", api.MaxWorkerPage))
		}
		limit = n
	}
	var after string
	if s := c.Query("cursor"); s != "" {
		raw, ok := strings.CutPrefix(s, workerCursorPrefix)
		pos, err := base64.RawURLEncoding.DecodeString(raw)
		if !ok || err != nil || len(s) > 512 || !strings.Contains(string(pos), "\x00") {
			return writeProblem(c, job.Userf(errBadQuery, "cursor is not a next_cursor this API gave"))
		}
		after = string(pos)
	}
	items, more := g.types.workersPage(g.cfg.Now(), after, limit)
	page := api.AdminWorkerPage{Workers: items}
	if more {
		page.NextCursor = workerCursor(&items[len(items)-1])
	}
	return g.writeAdmin(c, http.StatusOK, page)
}

// workersPage groups the live presence by process (credential, worker
// name) and returns up to limit processes after the position after
// ("credential\x00worker"), and whether more follow.
func (t *typeRegistry) workersPage(now time.Time, after string, limit int) ([]api.AdminWorker, bool) {
	t.mu.RLock()
	procs := map[string]*api.AdminWorker{}
	for _, p := range t.workers {
		if now.Sub(p.SeenAt) > natsjs.PresenceTTL {
			continue
		}
		pos := p.Credential + "\x00" + p.Worker
		if pos <= after {
			continue
		}
		w := procs[pos]
		if w == nil {
			w = &api.AdminWorker{Credential: p.Credential, Worker: p.Worker, StartedAt: p.StartedAt, SeenAt: p.SeenAt,
				Busy: new(int)}
			procs[pos] = w
		}
		w.Types = append(w.Types, api.AdminWorkerType{Type: p.Type, Slots: p.Concurrency, Busy: p.Busy, SeenAt: p.SeenAt})
		w.Slots += p.Concurrency
		if p.Busy == nil || w.Busy == nil {
			w.Busy = nil // one type that does not say makes the sum unknown
		} else {
			*w.Busy += *p.Busy
		}
		if p.SeenAt.After(w.SeenAt) {
			w.SeenAt = p.SeenAt
		}
		if p.StartedAt.Before(w.StartedAt) {
			w.StartedAt = p.StartedAt
		}
	}
	t.mu.RUnlock()
	keys := make([]string, 0, len(procs))
	for k := range procs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	more := len(keys) > limit
	if more {
		keys = keys[:limit]
	}
	out := make([]api.AdminWorker, len(keys))
	for i, k := range keys {
		w := procs[k]
		sort.Slice(w.Types, func(a, b int) bool { return w.Types[a].Type < w.Types[b].Type })
		out[i] = *w
	}
	return out, more
}
