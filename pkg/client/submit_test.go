package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeID reads the job id of an admission answer. It runs in the proxy's
// handler goroutine, so it reports with assert (never require there) and
// returns "" on a bad answer, which the test's own goroutine then fails on.
func decodeID(t *testing.T, resp *http.Response) string {
	t.Helper()
	var res job.Resource
	if !assert.NoError(t, json.NewDecoder(resp.Body).Decode(&res)) || !assert.True(t, job.ValidID(res.ID), "id %q", res.ID) {
		return ""
	}
	return res.ID
}

// The gateway commits the job, then the connection dies before the client
// reads the answer. The SDK retries with the same key and gets the same job;
// the server holds exactly one.
func TestFlakyProxyDropsCommittedResponse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newProxy(t, b.URL)
	var dropped atomic.Bool
	committed := make(chan string, 1)
	p.setHook(func(w http.ResponseWriter, r *http.Request, forward func() *http.Response) bool {
		if r.Method != http.MethodPost || !dropped.CompareAndSwap(false, true) {
			return false
		}
		resp := forward()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		committed <- decodeID(t, resp)
		conn, _, err := w.(http.Hijacker).Hijack()
		require.NoError(t, err)
		conn.Close() // the answer never reaches the client
		return true
	})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)

	c := newClient(t, srv.URL, b.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := c.Submit(ctx, "permit_report", permit)
	require.NoError(t, err)

	require.Equal(t, <-committed, sub.Job.ID, "the retry must return the job the lost answer was about")
	require.True(t, sub.Replayed, "the second attempt is a replay of the committed one")
	posts := 0
	for _, r := range p.requests() {
		if r == "POST /v1/jobs" {
			posts++
		}
	}
	require.Equal(t, 2, posts)
	require.Len(t, b.storedJobs(t), 1, "the server holds one job")
	page, err := c.List(ctx, "", 0, "")
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, sub.Job.ID, page.Jobs[0].ID)
}

// A process submits and dies (its context ends) before the answer arrives.
// A new process on the same journal resumes with the same key: same job,
// one job on the server. Re-running the identical submission finds it too;
// once the job is finished, an identical submission is a new job.
func TestKillAndResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newProxy(t, b.URL)
	committed := make(chan string, 1)
	p.setHook(func(w http.ResponseWriter, r *http.Request, forward func() *http.Response) bool {
		if r.Method != http.MethodPost {
			return false
		}
		resp := forward()
		committed <- decodeID(t, resp)
		<-r.Context().Done() // hold the answer until the client is gone
		return true
	})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	journal := filepath.Join(t.TempDir(), "journal.db")

	first := newClient(t, srv.URL, b.Token, client.WithJournal(journal))
	ctx, kill := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := first.Submit(ctx, "permit_report", permit)
		errc <- err
	}()
	id := <-committed
	require.NotEmpty(t, id, "the gateway admitted the job")
	kill()
	err := <-errc
	require.ErrorIs(t, err, client.ErrNotConfirmed)
	require.ErrorIs(t, err, context.Canceled)

	// The restarted process (the network is fine now).
	p.setHook(nil)
	second := newClient(t, srv.URL, b.Token, client.WithJournal(journal))
	bg, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pending, err := second.Pending(bg)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, client.EntryPending, pending[0].State)
	require.Empty(t, pending[0].JobID, "the first process never learned the job id")

	subs, err := second.Resume(bg)
	require.NoError(t, err)
	require.Len(t, subs, 1)
	require.Equal(t, id, subs[0].Job.ID)
	require.True(t, subs[0].Replayed)
	require.Len(t, b.storedJobs(t), 1)

	// The CLI way: run the same submission again.
	again, err := second.Submit(bg, "permit_report", map[string]any{"pages": 63.0, "revision": 29, "case_id": 47})
	require.NoError(t, err)
	require.True(t, again.Reused)
	require.Equal(t, id, again.Job.ID)
	require.Len(t, b.storedJobs(t), 1)

	// Finished (here: canceled) jobs end their logical request.
	canceled, err := second.Cancel(bg, id)
	require.NoError(t, err)
	require.Equal(t, job.StateCanceled, canceled.State)
	pending, err = second.Pending(bg)
	require.NoError(t, err)
	require.Empty(t, pending)
	fresh, err := second.Submit(bg, "permit_report", permit)
	require.NoError(t, err)
	require.False(t, fresh.Reused)
	require.NotEqual(t, id, fresh.Job.ID)
	require.Len(t, b.storedJobs(t), 2)
}

func TestConflictValidationAndAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newClient(t, b.URL, b.Token)

	sub, err := c.Submit(ctx, "permit_report", permit, client.WithKey("r-63"))
	require.NoError(t, err)
	require.False(t, sub.Replayed)

	changed := map[string]any{"case_id": 47, "revision": 30, "pages": 63}
	// The journal knows the key belongs to another request.
	_, err = c.Submit(ctx, "permit_report", changed, client.WithKey("r-63"))
	var ce *client.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, sub.Job.ID, ce.JobID)

	// Without that knowledge the server says the same.
	bare := newClient(t, b.URL, b.Token, client.WithoutJournal())
	_, err = bare.Submit(ctx, "permit_report", changed, client.WithKey("r-63"))
	require.ErrorAs(t, err, &ce)
	require.Equal(t, sub.Job.ID, ce.JobID)
	require.ErrorIs(t, err, job.ErrKeyReused)
	require.Equal(t, 409, ce.Problem.Status)
	require.Contains(t, err.Error(), sub.Job.ID)

	// 422 lists the fields; the key is not consumed and not kept.
	_, err = c.Submit(ctx, "permit_report", map[string]any{"case_id": 47, "revision": 29, "pages": 0, "color": 1})
	var ve *client.ValidationError
	require.ErrorAs(t, err, &ve)
	require.ErrorIs(t, err, job.ErrValidation)
	fields := []string{}
	for _, fe := range ve.Errors {
		fields = append(fields, fe.Field)
	}
	require.ElementsMatch(t, []string{"/params/pages", "/params/color"}, fields)
	entries, err := c.Journal().Entries("")
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the admitted submission is journaled")

	// A rejected token does not cost the key: the entry stays resumable.
	stale := newClient(t, b.URL, "not-a-token")
	_, err = stale.Submit(ctx, "permit_report", permit)
	var pe *client.ProblemError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 401, pe.Status)
	require.ErrorIs(t, err, job.ErrUnauthorized)
	require.ErrorIs(t, err, client.ErrNotConfirmed)
	pending, err := stale.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)

	// Not found reads like any other problem.
	_, err = c.Get(ctx, "job_aaaaaaaaaaaaaaaaaaaaaaaaaa")
	require.ErrorIs(t, err, job.ErrNotFound)
	require.True(t, strings.HasSuffix(err.Error(), "(404 not-found)"), err.Error())
}

// Two concurrent identical submissions with the caller's key, each through
// its own client without a journal: one job.
func TestConcurrentSameKeyOneJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := make(chan string, 8)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			c, err := client.New(b.URL, b.Token, client.WithoutJournal())
			if err != nil {
				errs <- err
				return
			}
			s, err := c.Submit(ctx, "permit_report", permit, client.WithKey("double-click"))
			if err != nil {
				errs <- err
				return
			}
			ids <- s.Job.ID
		}()
	}
	var first string
	for range 8 {
		select {
		case id := <-ids:
			if first == "" {
				first = id
			}
			require.Equal(t, first, id)
		case err := <-errs:
			require.NoError(t, err)
		}
	}
	require.Len(t, b.storedJobs(t), 1)
	require.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
}

// A library user who passes no journal option gets no file: a web server
// importing the SDK writes nothing to its state directory.
func TestNoJournalUnlessAskedFor(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	t.Setenv("HOME", dir)
	b := setup(t)
	c, err := client.New(b.URL, b.Token)
	require.NoError(t, err)
	require.Nil(t, c.Journal())
	_, err = c.Submit(context.Background(), "permit_report", map[string]any{"case_id": 47, "revision": 29})
	require.NoError(t, err)
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	}))
	require.Empty(t, files, "no journal file was written")

	j, err := client.New(b.URL, b.Token, client.WithJournal(""))
	require.NoError(t, err)
	require.NotNil(t, j.Journal(), "WithJournal(\"\") keeps one at the default path")
}
