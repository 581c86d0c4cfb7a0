package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/gateway"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/system"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// exportParams is a user's type with strings, an enum, a nested object and
// an optional array.
type exportParams struct {
	Region string `json:"region"`
	Format string `json:"format"`
	Range  struct{ From, To string }
	Tags   []string `json:"tags,omitempty"`
	Rows   int      `json:"rows"`
}

var exportSchema = json.RawMessage(`{
 "type":"object","additionalProperties":false,"required":["region","Range"],
 "properties":{
  "region":{"type":"string","minLength":1,"maxLength":32},
  "format":{"enum":["csv","tsv"],"default":"csv"},
  "Range":{"type":"object","additionalProperties":false,"required":["From","To"],
   "properties":{"From":{"type":"string","format":"date","maxLength":10},"To":{"type":"string","format":"date","maxLength":10}}},
  "tags":{"type":"array","maxItems":5,"items":{"type":"string","maxLength":16}},
  "rows":{"type":"integer","minimum":0,"maximum":100000,"default":3}
 }}`)

// gw starts a gateway on the test's JetStream.
func (b *testBundle) gateway(t *testing.T) (string, string) {
	t.Helper()
	secret := []byte("pipeline-test-secret-0123456789ab")
	g, err := gateway.New(gateway.Config{Addr: "127.0.0.1:0", AuthSecret: secret, SubmitRate: 1e6, SubmitBurst: 1e6,
		ReadRate: 1e6, ReadBurst: 1e6}, system.GatewayStores(b.env.Connect(t, "gateway").Res), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, g.Start(context.Background()))
	t.Cleanup(func() { _ = g.Stop(context.Background()) })
	tok, err := auth.Mint(secret, auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour, time.Now())
	require.NoError(t, err)
	return "http://" + g.Addr(), tok
}

type answer struct {
	status int
	body   map[string]any
}

func call(t *testing.T, method, url, tok, key, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(data) > 0 && data[0] == '{' {
		require.NoError(t, json.Unmarshal(data, &a.body))
	}
	return a
}

// startWorkers runs w's types on a connection of their own.
func (b *testBundle) startWorkers(t *testing.T, name string, register func(*worker.Workers)) {
	t.Helper()
	w, err := worker.New(worker.Config{Conn: b.env.Connect(t, name).NC, Name: name,
		HeartbeatInterval: 100 * time.Millisecond, PullWait: 300 * time.Millisecond,
		DrainTimeout: time.Second})
	require.NoError(t, err)
	register(w)
	b.ensureBroker(t, 100*time.Millisecond)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
}

// A user's type: declared by a worker that starts after the gateway,
// accepted within moments, validated against its schema, admitted once
// per key under a 64-way race, replayed, refused with 409 for other params,
// listed with its schema and live worker, run to a result of its content
// type.
func TestAUserTypeDeclaredByItsWorkerRunsEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base, tok := b.gateway(t)
	b.dispatcher(t, "dispatcher")
	body := `{"type":"sales_export","params":{"region":"<img src=x onerror=alert(1)>","Range":{"From":"2026-01-01","To":"2026-01-31"},"tags":["a","b"]}}`
	require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", base+"/v1/jobs", tok, "early", body).status,
		"not a type before a worker declares it")

	var runs atomic.Int32
	b.startWorkers(t, "exporter", func(w *worker.Workers) {
		require.NoError(t, worker.Register(w, worker.Type[exportParams]{
			Name: "sales_export", Description: "sales as CSV", Schema: exportSchema, ContentType: "text/csv",
			Attempts: 2, Timeout: 30 * time.Second,
			Work: func(ctx context.Context, j *worker.Job[exportParams]) error {
				runs.Add(1)
				p := j.Params
				fmt.Fprintf(j.Output(), "region,from,to,format,tags\n")
				for i := range p.Rows {
					j.Progress(i+1, p.Rows, "rows")
					fmt.Fprintf(j.Output(), "%q,%s,%s,%s,%s\n", p.Region, p.Range.From, p.Range.To, p.Format, strings.Join(p.Tags, "|"))
				}
				return nil
			},
		}))
	})

	// Accepted within a deadline, without restarting the gateway.
	var first answer
	require.Eventually(t, func() bool {
		first = call(t, "POST", base+"/v1/jobs", tok, "k-1", body)
		return first.status == http.StatusAccepted
	}, 10*time.Second, 50*time.Millisecond)
	id := first.body["id"].(string)
	require.EqualValues(t, "csv", first.body["params"].(map[string]any)["format"], "the schema's default applied")

	bad := call(t, "POST", base+"/v1/jobs", tok, "k-bad",
		`{"type":"sales_export","params":{"region":"","format":"xlsx","Range":{"From":"yesterday","To":"2026-01-31"},"tags":["a","b","c","d","e","f"]}}`)
	require.Equal(t, http.StatusUnprocessableEntity, bad.status)
	rules := map[string]string{}
	for _, e := range bad.body["errors"].([]any) {
		fe := e.(map[string]any)
		rules[fe["field"].(string)], _ = fe["rule"].(string)
	}
	require.Equal(t, map[string]string{"/params/region": "minLength", "/params/format": "enum",
		"/params/Range/From": "format", "/params/tags": "maxItems"}, rules)

	// 64 concurrent duplicates of a new key: one job, everyone gets its id.
	race := `{"type":"sales_export","params":{"region":"EU","Range":{"From":"2026-02-01","To":"2026-02-28"},"rows":2}}`
	var wg sync.WaitGroup
	ids := make(chan string, 64)
	statuses := make(chan int, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", base+"/v1/jobs", strings.NewReader(race))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Idempotency-Key", "raced")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			defer resp.Body.Close()
			var m map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&m)
			statuses <- resp.StatusCode
			if s, ok := m["id"].(string); ok {
				ids <- s
			}
		}()
	}
	wg.Wait()
	close(ids)
	close(statuses)
	created, seen := 0, map[string]bool{}
	for s := range statuses {
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, s)
		if s == http.StatusAccepted {
			created++
		}
	}
	for s := range ids {
		seen[s] = true
	}
	require.Equal(t, 1, created, "exactly one 202")
	require.Len(t, seen, 1, "one job id for every answer")

	replay := call(t, "POST", base+"/v1/jobs", tok, "raced", strings.Replace(race, `"rows":2`, `"rows":2.0`, 1))
	require.Equal(t, http.StatusOK, replay.status)
	conflict := call(t, "POST", base+"/v1/jobs", tok, "raced", strings.Replace(race, "EU", "US", 1))
	require.Equal(t, http.StatusConflict, conflict.status)

	// The type is listed with its live worker, and GET /v1/types/{name}
	// has its schema (the list leaves schemas out).
	types := call(t, "GET", base+"/v1/types", tok, "", "")
	require.Equal(t, http.StatusOK, types.status)
	var listed map[string]any
	for _, ty := range types.body["types"].([]any) {
		if m := ty.(map[string]any); m["name"] == "sales_export" {
			listed = m
		}
	}
	require.NotNil(t, listed)
	require.EqualValues(t, 1, listed["workers"])
	require.EqualValues(t, 2, listed["attempts"])
	require.Equal(t, "text/csv", listed["content_type"])
	require.NotContains(t, listed, "schema")
	one := call(t, "GET", base+"/v1/types/sales_export", tok, "", "")
	require.Equal(t, http.StatusOK, one.status)
	require.EqualValues(t, 1, one.body["workers"])
	require.Contains(t, one.body["schema"].(map[string]any)["properties"], "region")

	// Both jobs run to a CSV result; the hostile string is data, never markup.
	done := jobtest.Terminal(t, b.conn.Res, job.StoreKey("4", "reviewer-47", id), 30*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)
	require.Equal(t, 2, done.MaxAttempts, "the job keeps its type's limits")
	require.Equal(t, "text/csv", done.Output.ContentType)
	require.Equal(t, &job.Progress{Done: 3, Total: 3, Unit: "rows"}, done.Progress)
	data, err := b.conn.Res.Results.GetBytes(context.Background(), done.Output.Object)
	require.NoError(t, err)
	require.Equal(t, 4, strings.Count(string(data), "\n"))
	require.Contains(t, string(data), `"<img src=x onerror=alert(1)>",2026-01-01,2026-01-31,csv,a|b`)
	for s := range seen {
		raced := jobtest.Terminal(t, b.conn.Res, job.StoreKey("4", "reviewer-47", s), 30*time.Second)
		require.Equal(t, job.StateSucceeded, raced.State)
	}
	require.EqualValues(t, 2, runs.Load(), "each job ran once")
}

// A type whose jobs are slow does not hold up another type: each type is
// pulled from its own queue.
func TestASlowTypeDoesNotHoldUpAnother(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base, tok := b.gateway(t)
	release := make(chan struct{})
	defer close(release)
	var slowStarted atomic.Int32
	type none struct{}
	closed := json.RawMessage(`{"type":"object","additionalProperties":false}`)
	b.startWorkers(t, "workers", func(w *worker.Workers) {
		require.NoError(t, worker.Register(w, worker.Type[none]{Name: "slow", Schema: closed, Concurrency: 2,
			Work: func(ctx context.Context, _ *worker.Job[none]) error {
				slowStarted.Add(1)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}}))
		require.NoError(t, worker.Register(w, worker.Type[none]{Name: "quick", Schema: closed, Concurrency: 1,
			Work: func(context.Context, *worker.Job[none]) error { return nil }}))
	})
	submit := func(typ, key string) string {
		var a answer
		require.Eventually(t, func() bool {
			a = call(t, "POST", base+"/v1/jobs", tok, key, `{"type":"`+typ+`"}`)
			return a.status == http.StatusAccepted
		}, 10*time.Second, 50*time.Millisecond)
		return a.body["id"].(string)
	}
	for i := range 6 {
		submit("slow", fmt.Sprintf("slow-%d", i))
	}
	require.Eventually(t, func() bool { return slowStarted.Load() == 2 }, 10*time.Second, 10*time.Millisecond,
		"both slow slots busy")
	var quick []string
	for i := range 5 {
		quick = append(quick, submit("quick", fmt.Sprintf("quick-%d", i)))
	}
	for _, id := range quick {
		done := jobtest.Terminal(t, b.conn.Res, job.StoreKey("4", "reviewer-47", id), 10*time.Second)
		require.Equal(t, job.StateSucceeded, done.State)
		require.Nil(t, done.Output, "a job that wrote nothing succeeds without a result")
	}
	require.EqualValues(t, 2, slowStarted.Load(), "the slow type is still busy with its first two")
	a := call(t, "GET", base+"/v1/jobs/"+quick[0]+"/result", tok, "", "")
	require.Equal(t, http.StatusNotFound, a.status, "no result to link to")
}
