package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

type requesterEvent struct {
	id  string
	job job.Resource
}

// openRequesterEvents opens GET /v1/events and delivers its job events.
func (b *testBundle) openRequesterEvents(t *testing.T, tok, lastID string) (*http.Response, <-chan requesterEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/v1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	ch := make(chan requesterEvent, 16)
	if resp.StatusCode != http.StatusOK {
		close(ch)
		return resp, ch
	}
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var id, name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && name == "job":
				var e requesterEvent
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.job) == nil {
					e.id = id
					ch <- e
				}
			}
		}
	}()
	return resp, ch
}

// nextEvent is the stream's next event, within 15 s.
func nextEvent[E any](t *testing.T, ch <-chan E) E {
	t.Helper()
	select {
	case e, ok := <-ch:
		require.True(t, ok, "the stream ended")
		return e
	case <-time.After(15 * time.Second):
		t.Fatal("no event")
	}
	var none E
	return none
}

// GET /v1/events carries every change of the caller's own jobs, and none
// of anyone else's, on one stream that counts once against the cap; a
// reconnect with Last-Event-ID resumes right after that event.
func TestRequesterEventsStreamEveryOwnChange(t *testing.T) {
	t.Parallel()
	g, b := setup(t, func(c *Config) { c.MaxStreamsPerRequester, c.StreamHeartbeat = 1, 20*time.Millisecond })
	tok := b.token(t, "4", "reviewer-47", false)
	other := b.token(t, "4", "reviewer-48", false)
	resp, events := b.openRequesterEvents(t, tok, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	second, _ := b.openRequesterEvents(t, tok, "")
	require.Equal(t, http.StatusTooManyRequests, second.StatusCode, "the one stream counts against the cap")

	mine := b.postBatch(t, tok, "k", batchBody(3, nil)).batch(t)
	theirs := b.submit(t, other, "k", permit).job(t)
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/jobs/"+theirs.ID, other, "").status)
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/batches/"+mine.ID, tok, "").status)
	got := map[string]job.State{}
	var ids []string
	for range 3 {
		e := nextEvent(t, events)
		require.NotEqual(t, theirs.ID, e.job.ID, "another requester's job")
		got[e.job.ID] = e.job.State
		ids = append(ids, e.id)
	}
	for _, j := range mine.Jobs {
		require.Equal(t, job.StateCanceled, got[j.ID], "every job of the batch, canceled")
	}
	select {
	case e := <-events:
		t.Fatalf("an event too many: %+v", e)
	default:
	}

	// Resume after the first of the three: the other two come again.
	resp.Body.Close()
	require.Eventually(t, func() bool { return g.streams.open() == 0 }, 10*time.Second, 5*time.Millisecond)
	resp2, again := b.openRequesterEvents(t, tok, ids[0])
	require.Equal(t, http.StatusOK, resp2.StatusCode)
	require.Equal(t, ids[1], nextEvent(t, again).id)
	require.Equal(t, ids[2], nextEvent(t, again).id)
}
