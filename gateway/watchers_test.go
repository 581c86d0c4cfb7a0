package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// 83 reviewers each watching their own job cost the gateway one change
// feed, not 83 NATS subscriptions, and every one of them hears its job end.
func TestEightyThreeWatchersShareOneSubscription(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	const n = 83
	type watcher struct {
		tok, id string
		last    chan string
	}
	ws := make([]*watcher, n)
	for i := range ws {
		tok := b.token(t, "4", fmt.Sprintf("reviewer-%d", i), false)
		ws[i] = &watcher{tok: tok, id: b.submit(t, tok, "k", permit).job(t).ID, last: make(chan string, 1)}
	}
	var withOne uint32
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, w := range ws {
		if i == 1 { // subscriptions once the first stream is open
			require.Eventually(t, func() bool { return g.changes.watchers() == 1 }, 30*time.Second, 10*time.Millisecond)
			withOne = b.emb.Server().NumSubscriptions()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/v1/jobs/"+w.id+"/events", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+w.tok)
		resp, err := b.http.Do(req)
		require.NoError(t, err)
		go func() {
			defer resp.Body.Close()
			var last string
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					last = sc.Text()
				}
			}
			w.last <- last
		}()
	}
	require.Eventually(t, func() bool { return g.changes.watchers() == n }, 30*time.Second, 10*time.Millisecond)
	added := int(b.emb.Server().NumSubscriptions()) - int(withOne)
	require.Zero(t, added, "82 more streams add no NATS subscription (saw %d)", added)

	for i, w := range ws {
		b.succeed(t, "4", fmt.Sprintf("reviewer-%d", i), w.id, []byte("%PDF-1.4"))
	}
	for _, w := range ws {
		select {
		case last := <-w.last:
			require.Contains(t, last, `"state":"succeeded"`)
		case <-ctx.Done():
			t.Fatal("a watcher did not hear its job end")
		}
	}
	require.Eventually(t, func() bool { return g.changes.watchers() == 0 }, 10*time.Second, 10*time.Millisecond)
}

func TestReadRateLimitPerRequester(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.ReadRate, c.ReadBurst = 0.001, 3 })
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID
	for range 3 {
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs/"+id, tok, "").status)
	}
	r := b.do(t, http.MethodGet, "/v1/jobs/"+id, tok, "")
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "/problems/rate-limited", r.json(t)["type"])
	require.NotEmpty(t, r.header.Get("Retry-After"))
	other := b.token(t, "4", "reviewer-48", false)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs", other, "").status, "another requester is not limited")
}
