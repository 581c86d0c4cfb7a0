package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/stretchr/testify/require"
)

func batchItems(n int) []api.BatchItem {
	out := make([]api.BatchItem, n)
	for i := range out {
		out[i] = api.BatchItem{Type: "permit_report", Params: json.RawMessage(fmt.Sprintf(`{"case_id":%d,"revision":1,"pages":3}`, i+1))}
	}
	return out
}

// The first answer to a batch is lost after the gateway committed it: the
// process dies; a restarted one on the same journal resumes with the
// journaled key and gets the same batch, one set of jobs on the server.
func TestSubmitBatchKeyJournaledAndResumed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newProxy(t, b.URL)
	committed := make(chan string, 1)
	p.setHook(func(w http.ResponseWriter, r *http.Request, forward func() *http.Response) bool {
		if r.Method != http.MethodPost {
			return false
		}
		var got struct {
			ID string `json:"id"`
		}
		resp := forward()
		_ = json.NewDecoder(resp.Body).Decode(&got)
		committed <- got.ID
		<-r.Context().Done() // the answer never reaches the client
		return true
	})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	journal := filepath.Join(t.TempDir(), "journal.db")

	first := newClient(t, srv.URL, b.Token, client.WithJournal(journal))
	ctx, kill := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := first.SubmitBatch(ctx, batchItems(3), client.WithNotify(api.NotifyEach))
		errc <- err
	}()
	id := <-committed
	require.True(t, job.ValidBatchID(id))
	kill()
	require.ErrorIs(t, <-errc, client.ErrNotConfirmed)

	p.setHook(nil)
	second := newClient(t, srv.URL, b.Token, client.WithJournal(journal))
	bg, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subs, err := second.Resume(bg)
	require.NoError(t, err)
	require.Len(t, subs, 1)
	require.NotNil(t, subs[0].Batch)
	require.Equal(t, id, subs[0].Batch.ID)
	require.True(t, subs[0].Replayed)
	require.Equal(t, api.NotifyEach, subs[0].Batch.Notify)
	require.Len(t, subs[0].Batch.Jobs, 3)
	require.Len(t, b.storedJobs(t), 3, "one job per item, once")

	// The same batch again while it runs: the journal's key, the same batch.
	again, err := second.SubmitBatch(bg, batchItems(3), client.WithNotify(api.NotifyEach))
	require.NoError(t, err)
	require.True(t, again.Reused)
	require.Equal(t, id, again.Batch.ID)
	require.Len(t, b.storedJobs(t), 3)
}

// WaitBatch follows the batch's events to its end and returns every job.
func TestGetAndWaitBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b.URL, b.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := c.SubmitBatch(ctx, batchItems(4))
	require.NoError(t, err)
	require.False(t, sub.Replayed)
	got, err := c.GetBatch(ctx, sub.Batch.ID)
	require.NoError(t, err)
	require.Equal(t, 4, got.Counts.Queued)
	require.Equal(t, api.NotifyBatch, got.Notify)

	var mu sync.Mutex
	var updates []api.BatchCounts
	started := make(chan struct{})
	res := make(chan *api.Batch, 1)
	go func() {
		done, err := c.WaitBatch(ctx, sub.Batch.ID, func(v *api.Batch) {
			mu.Lock()
			updates = append(updates, v.Counts)
			if len(updates) == 1 {
				close(started)
			}
			mu.Unlock()
		})
		if err != nil {
			t.Errorf("WaitBatch: %v", err)
		}
		res <- done
	}()
	<-started
	for _, j := range sub.Batch.Jobs {
		b.succeed(t, j.ID, []byte("%PDF-1.7 batch"), "")
	}
	var done *api.Batch
	select {
	case done = <-res:
	case <-ctx.Done():
		t.Fatal("WaitBatch did not return")
	}
	require.NotNil(t, done)
	require.True(t, done.Done)
	require.Equal(t, 4, done.Counts.Succeeded)
	require.Len(t, done.Jobs, 4)
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(updates), 2, "the start and at least the end")
	require.Equal(t, 4, updates[len(updates)-1].Succeeded)
}

// The requester stream is cut after its first event; the changes made
// while it is down arrive after the client reconnects with Last-Event-ID:
// none missed, none repeated.
func TestEventsResumeWithoutGap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newProxy(t, b.URL)
	var cut atomic.Bool
	sentFirst, gapDone := make(chan struct{}), make(chan struct{})
	p.setHook(func(w http.ResponseWriter, r *http.Request, _ func() *http.Response) bool {
		if r.URL.Path != "/v1/events" || !cut.CompareAndSwap(false, true) {
			return false
		}
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = p.target.Scheme, p.target.Host, p.target.Host, ""
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			t.Errorf("upstream: %v", err)
			return false
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.(http.Flusher).Flush()
		br := bufio.NewReader(resp.Body)
		inEvent := false
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return true
			}
			_, _ = w.Write([]byte(line))
			if strings.HasPrefix(line, "id:") {
				inEvent = true
			}
			if line == "\n" && inEvent {
				w.(http.Flusher).Flush()
				close(sentFirst)
				<-gapDone // the changes happen while the client is cut off
				return true
			}
		}
	})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, b.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	type seen struct{ id, job, state string }
	var mu sync.Mutex
	var got []seen
	ectx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- c.Events(ectx, "", func(ev client.Event) error {
			mu.Lock()
			got = append(got, seen{ev.ID, ev.Job.ID, string(ev.Job.State)})
			mu.Unlock()
			return nil
		})
	}()
	// The stream is in place once the proxy forwarded it; the first job's
	// admission is its first event.
	var first *client.Submission
	require.Eventually(t, func() bool {
		for _, r := range p.requests() {
			if r == "GET /v1/events" {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
	var err error
	// The proxy's upstream subscription may start a moment after the
	// request is seen: submit until the first event got through.
	for i := 0; ; i++ {
		first, err = c.Submit(ctx, "permit_report", map[string]any{"case_id": 900 + i, "revision": 1, "pages": 2})
		require.NoError(t, err)
		select {
		case <-sentFirst:
		case <-time.After(500 * time.Millisecond):
			continue
		}
		break
	}
	second, err := c.Submit(ctx, "permit_report", map[string]any{"case_id": 2, "revision": 1, "pages": 2})
	require.NoError(t, err)
	b.succeed(t, second.Job.ID, []byte("%PDF-1.7 gap"), "")
	close(gapDone)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range got {
			if s.job == second.Job.ID && s.state == "succeeded" {
				return true
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "the changes made during the gap arrive")
	stop()
	require.NoError(t, <-errc)
	mu.Lock()
	defer mu.Unlock()
	ids := map[string]bool{}
	var states []string
	for _, s := range got {
		require.False(t, ids[s.id], "event %s delivered twice", s.id)
		ids[s.id] = true
		if s.job == second.Job.ID {
			states = append(states, s.state)
		}
	}
	require.Equal(t, "queued", states[0], "the second job's admission, made while cut off, is not missed")
	require.Equal(t, "succeeded", states[len(states)-1])
	require.Contains(t, fmt.Sprint(got), first.Job.ID)
	n := 0
	for _, r := range p.requests() {
		if r == "GET /v1/events" {
			n++
		}
	}
	require.Equal(t, 2, n, "one reconnect")
}
