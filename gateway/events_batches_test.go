package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type streamEvent struct {
	id, name, data string
}

// openAllEvents opens GET /v1/events and delivers every event it sends.
func (b *testBundle) openAllEvents(t *testing.T, tok string) <-chan streamEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/v1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ch := make(chan streamEvent, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var e streamEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				e.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			case line == "" && e.name != "":
				ch <- e
				e = streamEvent{}
			}
		}
	}()
	return ch
}

// GET /v1/events follows each change of an item that moves its batch on
// with the batch's own event (the batch resource, under the item event's
// id): counts step by step, done once; a job of no batch brings none.
func TestRequesterEventsCarryTheBatchesChanges(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.StreamHeartbeat = 20 * time.Millisecond })
	tok := b.token(t, "4", "reviewer-47", false)
	events := b.openAllEvents(t, tok)
	bat := b.postBatch(t, tok, "k", batchBody(3, nil)).batch(t)
	single := b.submit(t, tok, "single", permit).job(t)

	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/jobs/"+single.ID, tok, "").status)
	e := nextEvent(t, events)
	require.Equal(t, "job", e.name)
	require.Contains(t, e.data, single.ID)

	for i, j := range bat.Jobs {
		require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/jobs/"+j.ID, tok, "").status)
		item := nextEvent(t, events)
		require.Equal(t, "job", item.name)
		require.Contains(t, item.data, j.ID)
		be := nextEvent(t, events)
		require.Equal(t, "batch", be.name, "the item's change moved its batch on")
		require.Equal(t, item.id, be.id)
		var res batchResource
		require.NoError(t, json.Unmarshal([]byte(be.data), &res))
		require.Equal(t, bat.ID, res.ID)
		require.Equal(t, i+1, res.Counts.Canceled)
		require.Equal(t, 3, res.Total)
		require.Equal(t, i == 2, res.Done)
		require.Empty(t, res.Jobs, "the batch event leaves its jobs out")
	}
	select {
	case e := <-events:
		t.Fatalf("an event too many: %+v", e)
	case <-time.After(200 * time.Millisecond):
	}
}
