package endpointcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/endpoint"
	"github.com/stretchr/testify/require"
)

// An endpoint type's concurrency key holds through the whole deployment:
// of the jobs with the same params value, the handler never sees two at
// once, while jobs of other values run beside them within the endpoint's
// own concurrency.
func TestAnEndpointTypesConcurrencyKeyHoldsPerValue(t *testing.T) {
	t.Parallel()
	d := start(t)
	var mu sync.Mutex
	inFlight, most := map[int]int{}, map[int]int{}
	total, mostTotal := 0, 0
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req endpoint.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var p struct{ N int }
		_ = json.Unmarshal(req.Job.Params, &p)
		mu.Lock()
		inFlight[p.N]++
		total++
		most[p.N] = max(most[p.N], inFlight[p.N])
		mostTotal = max(mostTotal, total)
		mu.Unlock()
		time.Sleep(60 * time.Millisecond)
		mu.Lock()
		inFlight[p.N]--
		total--
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	d.declare(t, "sync_account", url, map[string]any{
		"concurrency": []map[string]any{{"key": "/params/n", "limit": 1}},
		"retry":       map[string]any{"initial_seconds": 1, "max_seconds": 5, "multiplier": 2},
	})
	var ids []string
	for i := range 15 {
		ids = append(ids, d.submit(t, "sync_account", fmt.Sprintf(`{"n":%d}`, i%3)))
	}
	for _, id := range ids {
		j := d.until(t, id, 60*time.Second, terminal)
		require.Equal(t, "succeeded", j.State, "%+v", j)
	}
	mu.Lock()
	defer mu.Unlock()
	for n := range 3 {
		require.Equal(t, 1, most[n], "the jobs of n=%d ran one at a time", n)
	}
	require.Greater(t, mostTotal, 1, "jobs of different values ran beside each other")

	// The declaration shows its flow fields to every caller.
	status, data, _ := d.do(t, d.user, http.MethodGet, "/v1/types/sync_account", nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(data), `"concurrency":[{"key":"/params/n","limit":1}]`)
	require.Contains(t, string(data), `"retry":{"initial_seconds":1,"max_seconds":5,"multiplier":2}`)
}

// Flow fields out of bounds are refused, each named by its pointer.
func TestPutRefusesFlowFieldsOutOfBounds(t *testing.T) {
	t.Parallel()
	d := start(t)
	status, data, _ := d.do(t, d.operator, http.MethodPut, "/v1/admin/types/bad_flow", map[string]any{
		"schema":   json.RawMessage(`{"type":"object","additionalProperties":false}`),
		"endpoint": map[string]any{"url": "http://127.0.0.1:9/x"},
		"retry":    map[string]any{"initial_seconds": 0.01, "multiplier": 50},
		"concurrency": []map[string]any{{"key": "tenant", "limit": 1}, {"key": "/params/~2x", "limit": 1},
			{"key": "requester", "limit": 100000}},
		"rate_limit": map[string]any{"per_second": 1, "burst": 500, "key": "requester"},
	})
	require.Equal(t, http.StatusUnprocessableEntity, status, string(data))
	var p struct {
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(data, &p))
	var fields []string
	for _, e := range p.Errors {
		fields = append(fields, e.Field)
	}
	require.ElementsMatch(t, []string{"/retry", "/concurrency/1", "/concurrency/2", "/rate_limit"}, fields, string(data))
}

// A job held back by its type's flow control says so in its admin detail:
// "concurrency" while its key's places are taken, "rate limit" while its
// type's bucket is empty.
func TestAWaitingJobSaysWhichLimitHoldsItBack(t *testing.T) {
	t.Parallel()
	d := start(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	d.declare(t, "one_at_a_time", url, map[string]any{"concurrency": []map[string]any{{"key": "tenant", "limit": 1}}})
	d.declare(t, "slow_rate", url, map[string]any{"rate_limit": map[string]any{"per_second": 0.05, "burst": 1}})
	waiting := func(id string) string {
		status, data, _ := d.do(t, d.operator, http.MethodGet, "/v1/admin/jobs/"+id, nil)
		require.Equal(t, http.StatusOK, status, string(data))
		var j struct {
			State      string `json:"state"`
			WaitingFor string `json:"waiting_for"`
		}
		require.NoError(t, json.Unmarshal(data, &j))
		return j.State + "/" + j.WaitingFor
	}
	for typ, want := range map[string]string{"one_at_a_time": "queued/concurrency", "slow_rate": "queued/rate limit"} {
		first := d.submit(t, typ, `{"n":1}`)
		d.until(t, first, 20*time.Second, func(j jobView) bool { return j.State == "running" })
		second := d.submit(t, typ, `{"n":2}`)
		deadline := time.Now().Add(10 * time.Second)
		got := waiting(second)
		for got != want && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			got = waiting(second)
		}
		require.Equal(t, want, got, typ)
	}
	// The metrics count the starts held back, by the limit's class. The
	// admin detail reads the limits' state from the store, so it can say
	// "rate limit" before the broker has tried the job (and counted it).
	held := []string{`jobgate_flow_held_back_total{class="tenant",type="one_at_a_time"}`,
		`jobgate_flow_held_back_total{class="rate",type="slow_rate"}`,
		`jobgate_flow_places_taken_total{class="tenant",type="one_at_a_time"} 1`}
	var metrics string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		status, data, _ := d.do(t, "", http.MethodGet, "/metrics", nil)
		require.Equal(t, http.StatusOK, status)
		metrics = string(data)
		all := true
		for _, line := range held {
			all = all && strings.Contains(metrics, line)
		}
		if all || time.Now().After(deadline) {
			break
		}
	}
	for _, line := range held {
		require.Contains(t, metrics, line)
	}
}

// Through a whole deployment, an endpoint type with one request in flight
// takes a requester's waiting jobs by their priority, the oldest first
// within one, as POST /v1/jobs set it.
func TestAWaitingRequestersJobsStartInPriorityOrder(t *testing.T) {
	t.Parallel()
	d := start(t)
	var mu sync.Mutex
	var order []int
	release := make(chan struct{})
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req endpoint.Request
		_ = json.NewDecoder(r.Body).Decode(&req)
		var p struct{ N int }
		_ = json.Unmarshal(req.Job.Params, &p)
		if p.N == 0 {
			<-release // the first job holds the only request in flight
		}
		mu.Lock()
		order = append(order, p.N)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	d.declare(t, "ordered", url, map[string]any{"endpoint": map[string]any{"url": url, "concurrency": 1}})
	first := d.submit(t, "ordered", `{"n":0}`)
	d.until(t, first, 20*time.Second, func(j jobView) bool { return j.State == "running" })
	var ids []string
	for i, prio := range []int{5, 3, 1, 4, 1, 2} {
		status, data, _ := d.do(t, d.user, http.MethodPost, "/v1/jobs",
			fmt.Sprintf(`{"type":"ordered","params":{"n":%d},"priority":%d}`, 10*prio+i, prio), "Idempotency-Key", fmt.Sprintf("prio-%d", i))
		require.Equal(t, http.StatusAccepted, status, string(data))
		var j struct{ ID string }
		require.NoError(t, json.Unmarshal(data, &j))
		ids = append(ids, j.ID)
	}
	// The relay publishes their work while the slot is taken: all of it
	// is in the work stream before the first job ends.
	lanes := d.sys.Resources().Work.Lanes("ordered")
	deadline := time.Now().Add(10 * time.Second)
	for {
		msgs, err := lanes.OldestBatch(context.Background(), "acme", "ann", 0, 16, 1<<20)
		require.NoError(t, err)
		if len(msgs) == len(ids)+1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the work of every job published")
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	for _, id := range append(ids, first) {
		require.Equal(t, "succeeded", d.until(t, id, 30*time.Second, terminal).State)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{0, 12, 14, 25, 31, 43, 50}, order, "by priority, then admission")
}
