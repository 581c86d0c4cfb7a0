package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/jobgate/jobgate/pkg/api"
)

// The operator's job type and worker calls of the admin API. Each needs an
// operator token (operator: true); any other is a *ProblemError matching
// api.ErrForbidden. A type that is not declared matches api.ErrNotFound.

func adminTypePath(name string) string { return "/v1/admin/types/" + url.PathEscape(name) }

// PauseType pauses a job type: its jobs are still admitted and wait
// queued, and none starts until ResumeType; a job already running goes on.
// Pausing a paused type changes nothing, so a retried call is safe.
func (a *Admin) PauseType(ctx context.Context, name string) (*api.AdminTypeState, error) {
	var s api.AdminTypeState
	if err := a.call(ctx, &request{method: http.MethodPost, path: adminTypePath(name) + "/pause"}, http.StatusOK, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ResumeType lifts a pause: the type's waiting jobs start again.
func (a *Admin) ResumeType(ctx context.Context, name string) (*api.AdminTypeState, error) {
	var s api.AdminTypeState
	if err := a.call(ctx, &request{method: http.MethodPost, path: adminTypePath(name) + "/resume"}, http.StatusOK, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteType deletes a job type none of whose jobs is queued or running
// (else a *ProblemError matching api.ErrTypeInUse); a built-in type
// matches api.ErrForbidden. Its name is then free for any credential to
// declare. A retried call whose earlier attempt deleted the type (its
// answer lost) returns nil, not api.ErrNotFound.
func (a *Admin) DeleteType(ctx context.Context, name string) error {
	resp, attempts, err := a.c.send(ctx, &request{method: http.MethodDelete, path: adminTypePath(name)})
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNoContent {
		resp.Body.Close()
		return nil
	}
	err = a.c.unexpected(resp)
	if attempts > 1 && errors.Is(err, api.ErrNotFound) {
		return nil
	}
	return err
}

// WorkerFilter pages GET /v1/admin/workers: Limit (0: the server's
// default, api.DefaultWorkerPage; at most api.MaxWorkerPage) and Cursor,
// a page's NextCursor.
type WorkerFilter struct {
	Limit  int
	Cursor string
}

// Workers returns a page of the live worker processes, by credential then
// worker name: each with its types, slots, busy slots and last hello.
func (a *Admin) Workers(ctx context.Context, f WorkerFilter) (*api.AdminWorkerPage, error) {
	q := url.Values{}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	var p api.AdminWorkerPage
	if err := a.call(ctx, &request{method: http.MethodGet, path: "/v1/admin/workers", query: q}, http.StatusOK, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
