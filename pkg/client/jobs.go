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

	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/pkg/api"
)

// Snapshot is one read of a job with its validators.
type Snapshot struct {
	// Job is the resource; nil when NotModified.
	Job *api.Resource
	// ETag identifies the stored job version (send it back to GetIfChanged).
	ETag string
	// NotModified says the job did not change since the ETag given.
	NotModified bool
	// RetryAfter is the server's suggested poll interval (while not
	// terminal).
	RetryAfter time.Duration
}

func jobPath(id string) string { return "/v1/jobs/" + url.PathEscape(id) }

// Get reads a job. A job that does not exist, or is not the caller's, is a
// *ProblemError matching api.ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (*api.Resource, error) {
	s, err := c.GetIfChanged(ctx, id, "", 0)
	if err != nil {
		return nil, err
	}
	return s.Job, nil
}

// GetIfChanged reads a job unless it still has etag (then NotModified). With
// wait > 0 and an etag the server long-polls: it answers as soon as the job
// changes, or NotModified after wait (at most 30s).
func (c *Client) GetIfChanged(ctx context.Context, id, etag string, wait time.Duration) (*Snapshot, error) {
	r := &request{method: http.MethodGet, path: jobPath(id), header: http.Header{}}
	if etag != "" {
		r.header.Set("If-None-Match", etag)
		if wait > 0 {
			r.query = url.Values{"wait": {wait.String()}}
			r.extra = wait
		}
	}
	resp, _, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{ETag: resp.Header.Get("ETag"), RetryAfter: retry.After(resp.Header, c.clock.Now())}
	switch resp.StatusCode {
	case http.StatusNotModified:
		resp.Body.Close()
		s.NotModified = true
		if s.ETag == "" {
			s.ETag = etag
		}
		return s, nil
	case http.StatusOK:
		if s.Job, err = decodeResource(resp); err != nil {
			return nil, err
		}
		c.observe(s.Job)
		return s, nil
	}
	return nil, c.unexpected(resp)
}

// Page is one page of List.
type Page struct {
	Jobs       []*api.Resource `json:"jobs"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// List returns the caller's own jobs, newest first. state filters ("" for
// all), limit bounds the page (0 for the server's default), cursor continues
// from a previous page's NextCursor.
func (c *Client) List(ctx context.Context, state api.State, limit int, cursor string) (*Page, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", string(state))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	resp, _, err := c.send(ctx, &request{method: http.MethodGet, path: "/v1/jobs", query: q})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, c.unexpected(resp)
	}
	defer resp.Body.Close()
	var p Page
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: job list: %v", ErrUnexpectedResponse, err)
	}
	for _, j := range p.Jobs {
		c.observe(j)
	}
	return &p, nil
}

// Cancel cancels a queued or running job and returns it (canceled). A job
// already finished is a *ProblemError matching api.ErrTerminal — unless it
// is canceled and this call retried, in which case an earlier attempt of
// this very call canceled it and the canceled job is returned.
func (c *Client) Cancel(ctx context.Context, id string) (*api.Resource, error) {
	resp, attempts, err := c.send(ctx, &request{method: http.MethodDelete, path: jobPath(id)})
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted:
		res, err := decodeResource(resp)
		if err == nil {
			c.observe(res)
		}
		return res, err
	}
	perr := c.unexpected(resp)
	if attempts > 1 && errors.Is(perr, api.ErrTerminal) {
		if res, gerr := c.Get(ctx, id); gerr == nil && res.State == api.StateCanceled {
			return res, nil
		}
	}
	return nil, perr
}
