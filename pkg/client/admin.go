package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
)

// Admin is the admin API of the gateway (/v1/admin): every job of a tenant
// for a tenant admin token (admin: true), of every tenant for an operator
// token (operator: true). Any other token gets a *ProblemError matching
// api.ErrForbidden; a job the role does not reach matches api.ErrNotFound,
// as one that does not exist. It shares its Client's transport, retry
// policy and logger, and is safe for concurrent use.
type Admin struct{ c *Client }

// Admin returns the client's admin API.
func (c *Client) Admin() *Admin { return &Admin{c: c} }

func adminJobPath(id string) string { return "/v1/admin/jobs/" + url.PathEscape(id) }

// List returns a page of the jobs the role reaches that f keeps, newest
// first. f.Tenant is for operators (a tenant admin always gets its own
// tenant); f.Limit bounds the page (0: the server's default,
// api.DefaultAdminPage; at most api.MaxAdminPage); f.Cursor continues from
// a page's NextCursor. A page whose filters skip many jobs may hold fewer
// than the limit and still have a NextCursor.
func (a *Admin) List(ctx context.Context, f api.AdminJobFilter) (*api.AdminJobPage, error) {
	q := url.Values{}
	set := func(name, v string) {
		if v != "" {
			q.Set(name, v)
		}
	}
	set("tenant", f.Tenant)
	set("requester", f.Requester)
	set("type", f.Type)
	set("state", string(f.State))
	set("category", f.Category)
	set("waiting_for", f.WaitingFor)
	if !f.CreatedAfter.IsZero() {
		q.Set("created_after", f.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if !f.CreatedBefore.IsZero() {
		q.Set("created_before", f.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	set("cursor", f.Cursor)
	var p api.AdminJobPage
	if err := a.call(ctx, &request{method: http.MethodGet, path: "/v1/admin/jobs", query: q}, http.StatusOK, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Get reads one job with its attempts (each with its full error message)
// and its retry links.
func (a *Admin) Get(ctx context.Context, id string) (*api.AdminJob, error) {
	var j api.AdminJob
	if err := a.call(ctx, &request{method: http.MethodGet, path: adminJobPath(id)}, http.StatusOK, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Cancel cancels a queued or running job the role reaches and returns it
// (canceled). A finished job is a *ProblemError matching api.ErrTerminal —
// unless it is canceled and this call retried, in which case an earlier
// attempt of this very call canceled it and the job is returned.
func (a *Admin) Cancel(ctx context.Context, id string) (*api.AdminJob, error) {
	var j api.AdminJob
	attempts, err := a.send(ctx, &request{method: http.MethodPost, path: adminJobPath(id) + "/cancel"}, http.StatusAccepted, &j)
	if err == nil {
		return &j, nil
	}
	if attempts > 1 && errors.Is(err, api.ErrTerminal) {
		if got, gerr := a.Get(ctx, id); gerr == nil && got.State == api.StateCanceled {
			return got, nil
		}
	}
	return nil, err
}

// Retried is the outcome of Retry.
type Retried struct {
	// Job is the new job (retry_of the old one).
	Job *api.AdminJob
	// Key is the Idempotency-Key used (the caller's, or a new one): the
	// same key again returns the same job. Do not log it.
	Key string
	// Replayed says an earlier retry with this key made the job.
	Replayed bool
	// Attempts is the number of HTTP attempts this call made.
	Attempts int
}

// Retry makes a new job from a failed or canceled one: the same type,
// params, tenant and requester; the old job keeps its state and gains
// RetriedAs. The key is chosen once — the caller's (WithKey; WithFreshKey
// does nothing here) or a new one — and every attempt of the call sends
// it, so a retried request makes one job. A job neither failed nor
// canceled is a *ProblemError matching api.ErrNotRetryable, one that
// failed permanently api.ErrPermanentFailure unless WithConfirmPermanent
// is given. Without a
// definitive answer the error is a *NotConfirmedError (ErrNotConfirmed)
// whose Key finishes the retry when passed again with WithKey.
func (a *Admin) Retry(ctx context.Context, id string, opts ...SubmitOption) (*Retried, error) {
	key, err := chooseKey(opts)
	if err != nil {
		return nil, err
	}
	var o submitOptions
	for _, f := range opts {
		f(&o)
	}
	path := adminJobPath(id) + "/retry"
	if o.confirmPermanent {
		path += "?confirm_permanent=true"
	}
	r := &request{method: http.MethodPost, path: path, header: http.Header{"Idempotency-Key": {key}}, keyHash: keyTag(key)}
	resp, attempts, err := a.c.send(ctx, r)
	if err != nil {
		return nil, &NotConfirmedError{Key: key, Err: err}
	}
	switch resp.StatusCode {
	case http.StatusCreated, http.StatusOK:
		var j api.AdminJob
		if err := decodeJSON(resp, &j); err != nil {
			return nil, &NotConfirmedError{Key: key, Err: err}
		}
		return &Retried{Job: &j, Key: key, Replayed: resp.StatusCode == http.StatusOK, Attempts: attempts}, nil
	}
	perr := a.c.unexpected(resp)
	if resp.StatusCode < 400 || resp.StatusCode >= 500 || resp.StatusCode == http.StatusUnauthorized {
		return nil, &NotConfirmedError{Key: key, Err: perr}
	}
	return nil, perr
}

// Stats counts per job type what waits, runs and finished in the last hour
// and day. tenant is for operators ("": every tenant); a tenant admin
// always gets its own tenant's.
func (a *Admin) Stats(ctx context.Context, tenant string) (*api.Stats, error) {
	q := url.Values{}
	if tenant != "" {
		q.Set("tenant", tenant)
	}
	var s api.Stats
	if err := a.call(ctx, &request{method: http.MethodGet, path: "/v1/admin/stats", query: q}, http.StatusOK, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// bulkExtra is what a bulk call may take past the attempt timeout: its
// time budget, and a job change begun within it.
const bulkExtra = api.BulkTimeBudget + 10*time.Second

// BulkCancel cancels every queued or running job that req's filters (at
// least one) and the role reach, newest first, each as Cancel would; with
// req.DryRun it counts them and changes nothing. One call looks at most at
// req.Limit jobs (0: api.MaxBulkJobs) for at most api.BulkTimeBudget; the
// result's Truncated then says why it stopped and its NextCursor, as
// req.Cursor, goes on. Repeating a call is safe: a job already canceled is
// skipped. A bad req is a *ValidationError (422).
func (a *Admin) BulkCancel(ctx context.Context, req api.AdminBulkRequest) (*api.AdminBulkResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode bulk request: %w", err)
	}
	var res api.AdminBulkResult
	r := &request{method: http.MethodPost, path: "/v1/admin/jobs/cancel", body: body, extra: bulkExtra}
	if err := a.call(ctx, r, http.StatusOK, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// BulkRetried is the outcome of BulkRetry.
type BulkRetried struct {
	Result *api.AdminBulkResult
	// Key is the Idempotency-Key used ("" for a dry run without WithKey):
	// the same call again with WithKey(Key) makes no job twice. Do not log
	// it.
	Key string
}

// BulkRetry retries every failed or canceled job that req's filters (at
// least one) and the role reach, each as Retry would, under a key derived
// from the call's Idempotency-Key and the job's id: the same call again
// with the same key (WithKey) makes no job twice and counts Replayed. The
// key is chosen once (the caller's or a new one; a dry run sends one only
// when given, and then also counts replays) and sent on every attempt.
// Limits and cursor are those of BulkCancel. Without a definitive answer
// the error is a *NotConfirmedError whose Key finishes the call.
func (a *Admin) BulkRetry(ctx context.Context, req api.AdminBulkRequest, opts ...SubmitOption) (*BulkRetried, error) {
	var o submitOptions
	for _, f := range opts {
		f(&o)
	}
	key := ""
	if !req.DryRun || o.key != "" {
		var err error
		if key, err = chooseKey(opts); err != nil {
			return nil, err
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode bulk request: %w", err)
	}
	r := &request{method: http.MethodPost, path: "/v1/admin/jobs/retry", body: body, extra: bulkExtra, header: http.Header{}}
	if key != "" {
		r.header.Set("Idempotency-Key", key)
		r.keyHash = keyTag(key)
	}
	var res api.AdminBulkResult
	if _, err := a.send(ctx, r, http.StatusOK, &res); err != nil {
		var p *ProblemError
		if key != "" && (!errors.As(err, &p) || p.Status >= 500 || p.Status == http.StatusUnauthorized) {
			return nil, &NotConfirmedError{Key: key, Err: err}
		}
		return nil, err
	}
	return &BulkRetried{Result: &res, Key: key}, nil
}

// chooseKey is the caller's key (WithKey), checked, or a new one.
func chooseKey(opts []SubmitOption) (string, error) {
	var o submitOptions
	for _, f := range opts {
		f(&o)
	}
	if o.key == "" {
		return NewKey(), nil
	}
	if !api.ValidKey(o.key) {
		return "", fmt.Errorf("%w: must be 1-255 printable ASCII characters", api.ErrKeyInvalid)
	}
	return o.key, nil
}

// call sends r and decodes a want answer into out.
func (a *Admin) call(ctx context.Context, r *request, want int, out any) error {
	_, err := a.send(ctx, r, want, out)
	return err
}

// send sends r (retrying as every call does) and decodes a want answer
// into out; any other answer is its problem. It returns the attempts made.
func (a *Admin) send(ctx context.Context, r *request, want int, out any) (int, error) {
	resp, attempts, err := a.c.send(ctx, r)
	if err != nil {
		return attempts, err
	}
	if resp.StatusCode != want {
		return attempts, a.c.unexpected(resp)
	}
	return attempts, decodeJSON(resp, out)
}

// decodeJSON reads a buffered JSON answer into out.
func decodeJSON(resp *http.Response, out any) error {
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w: %v", ErrUnexpectedResponse, err)
	}
	return nil
}
