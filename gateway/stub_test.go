package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/index"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// memRecords is a record store in memory. The gateway depends on the small
// interfaces it declares, so a test replaces one store, or one method of it,
// without a JetStream server.
type memRecords struct {
	mu        sync.Mutex
	m         map[string]*job.Record
	createErr error
}

func (s *memRecords) Create(_ context.Context, r *job.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.createErr != nil {
		return s.createErr
	}
	if _, ok := s.m[r.Key()]; ok {
		return natsjs.ErrExists
	}
	r.Revision = 1
	s.m[r.Key()] = r.Clone()
	return nil
}

func (s *memRecords) Get(_ context.Context, key string) (*job.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[key]; ok {
		return r.Clone(), nil
	}
	return nil, job.ErrNotFound
}

func (s *memRecords) FindInTenant(context.Context, string, string) (*job.Record, error) {
	return nil, job.ErrNotFound
}

func (s *memRecords) List(context.Context, string, string) ([]*job.Record, error) { return nil, nil }

func (s *memRecords) Mutate(context.Context, string, func(*job.Record) error) (*job.Record, error) {
	return nil, errors.ErrUnsupported
}

func (s *memRecords) Ping(context.Context) error { return nil }

type failingWork struct{ calls int }

func (w *failingWork) Publish(context.Context, *job.Record, int) error {
	w.calls++
	return fmt.Errorf("publish: %w", job.ErrUnavailable)
}

type fixedSecrets struct{}

func (fixedSecrets) Get(_ context.Context, name string) ([]byte, error) {
	return []byte("secret of " + name + " for tests only"), nil
}

// fixedTypes declares permit_report and has no workers.
type fixedTypes struct{}

func (fixedTypes) WatchTypes(_ context.Context, fn func(*natsjs.TypeChange)) error {
	fn(&natsjs.TypeChange{Decl: jobtest.PermitReport()})
	fn(nil)
	return nil
}

func (fixedTypes) WatchWorkers(_ context.Context, fn func(string, *natsjs.Presence)) error {
	fn("", nil)
	return nil
}

// memStores are in-memory stores around jobs and work: fixed secrets,
// permit_report declared with no workers, budgets with room, and nothing
// else stored (no events, results, batches or changes, and no change log:
// lists read jobs).
func memStores(jobs records, work workQueue) Stores {
	return Stores{Jobs: jobs, Work: work, Events: noEvents{}, Secrets: fixedSecrets{}, Files: noFiles{}, Types: fixedTypes{},
		Batches: noBatches{}, Storage: roomyStorage{}, Changes: noChanges{errors.ErrUnsupported}, Log: noLog{}, Slots: noSlots{}}
}

// noSlots holds no concurrency place and full rate buckets.
type noSlots struct{}

func (noSlots) Leased(context.Context, string, time.Time) (int, error) { return 0, nil }
func (noSlots) Waiting(context.Context) (natsjs.FlowWaiting, error)    { return nil, nil }
func (noSlots) Tokens(_ context.Context, _ string, _ float64, burst int, _ time.Time) (float64, error) {
	return float64(burst), nil
}

// noEvents publishes nothing.
type noEvents struct{}

func (noEvents) Publish(context.Context, *job.Record) (bool, error) {
	return false, fmt.Errorf("events: %w", errors.ErrUnsupported)
}

// noFiles holds no result.
type noFiles struct{}

func (noFiles) Open(context.Context, string) (*natsjs.ResultFile, error) {
	return nil, job.ErrResultExpired
}

func (noFiles) TenantUse(context.Context) (map[string]int64, error) { return map[string]int64{}, nil }

// noBatches holds no batch and takes none.
type noBatches struct{}

func (noBatches) Create(context.Context, *job.BatchRecord) error {
	return fmt.Errorf("batches: %w", errors.ErrUnsupported)
}
func (noBatches) Get(context.Context, string) (*job.BatchRecord, error) { return nil, job.ErrNotFound }
func (noBatches) MarkAdmitted(context.Context, *job.BatchRecord, time.Time) error {
	return fmt.Errorf("batches: %w", errors.ErrUnsupported)
}

// roomyStorage has no byte budgets to check.
type roomyStorage struct{}

func (roomyStorage) StorageUse(context.Context) ([]natsjs.StorageUse, error) { return nil, nil }

// noChanges starts no record watch: every start fails with err.
type noChanges struct{ err error }

func (c noChanges) WatchChanges() (*natsjs.RecordWatch, error) { return nil, c.err }

// noLog is a record change log that cannot be read: the query index never
// catches up, so lists read the record store (the stub's own List).
type noLog struct{}

func (noLog) LogBounds(context.Context) (natsjs.LogBounds, error) {
	return natsjs.LogBounds{}, fmt.Errorf("change log: %w", errors.ErrUnsupported)
}
func (noLog) ReadLog(context.Context, uint64) (index.Log, error) {
	return nil, fmt.Errorf("change log: %w", errors.ErrUnsupported)
}

// stubGateway is a gateway on st, initialized without listening and
// stopped at cleanup, and a token of reviewer-47 of tenant 4.
func stubGateway(t *testing.T, st Stores) (*Gateway, string) {
	t.Helper()
	secret := []byte("0123456789abcdef0123456789abcdef")
	g, err := newGateway(Config{AuthSecret: secret}, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NoError(t, g.Init(context.Background()))
	t.Cleanup(func() { _ = g.Stop(context.Background()) })
	tok, err := auth.Mint(secret, auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour, time.Now())
	require.NoError(t, err)
	return g, tok
}

func stubSubmit(t *testing.T, g *Gateway, tok, key string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(`{"type":"permit_report","params":{"case_id":47,"revision":29}}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := g.App().Test(req, -1)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// The commit is what counts: a work publish that fails after it still
// admits the job (the relay publishes the same message from the change log).
func TestLostWorkPublishStillAdmits(t *testing.T) {
	t.Parallel()
	store, work := &memRecords{m: map[string]*job.Record{}}, &failingWork{}
	g, tok := stubGateway(t, memStores(store, work))
	resp := stubSubmit(t, g, tok, "k-1")
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, 1, work.calls)
	require.Len(t, store.m, 1)
}

// A store that does not answer admits nothing and says so with 503 and
// Retry-After: retrying with the same key is safe.
func TestStoreOutageIs503(t *testing.T) {
	t.Parallel()
	store, work := &memRecords{m: map[string]*job.Record{}, createErr: fmt.Errorf("%w: no responders", job.ErrUnavailable)}, &failingWork{}
	g, tok := stubGateway(t, memStores(store, work))
	resp := stubSubmit(t, g, tok, "k-1")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.Zero(t, work.calls, "no work without a commit")
	require.Empty(t, store.m)
}

// stubWatch is a record watch fed by the test.
type stubWatch struct {
	ch      chan natsjs.RecordChange
	stopped chan struct{}
}

func (w *stubWatch) Changes() <-chan natsjs.RecordChange { return w.ch }
func (w *stubWatch) Stop()                               { close(w.stopped) }

// A long-poll is woken by the change feed, not by polling the store: the
// stored change the watch delivers is the answer.
func TestLongPollWokenByTheChangeFeed(t *testing.T) {
	t.Parallel()
	store := &memRecords{m: map[string]*job.Record{}}
	now := time.Now().UTC()
	rec := &job.Record{ID: "job_abcdefghijklmnopqrstuvwxyz", Tenant: "4", Requester: "reviewer-47", Type: "permit_report", Params: []byte(`{}`),
		State: job.StateQueued, CreatedAt: now, UpdatedAt: now}
	require.NoError(t, store.Create(context.Background(), rec))
	w := &stubWatch{ch: make(chan natsjs.RecordChange, 1), stopped: make(chan struct{})}
	g, tok := stubGateway(t, memStores(store, &failingWork{}))
	g.changes = newChangeFeed(func() (recordWatch, error) { return w, nil })

	type answer struct {
		resp *http.Response
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		req := httptest.NewRequest(http.MethodGet, "/v1/jobs/job_abcdefghijklmnopqrstuvwxyz?wait=20s", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("If-None-Match", `"1"`)
		resp, err := g.App().Test(req, -1)
		done <- answer{resp, err}
	}()
	for deadline := time.Now().Add(5 * time.Second); g.changes.watchers() != 1; {
		select {
		case a := <-done:
			require.NoError(t, a.err)
			body, _ := io.ReadAll(a.resp.Body)
			t.Fatalf("the long-poll answered at once: %d %s", a.resp.StatusCode, body)
		case <-time.After(time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "the long-poll never waited")
	}

	// The store is not asked again: only the watch says the job moved on.
	next := rec.Clone()
	require.NoError(t, next.Transition(job.StateRunning, now.Add(time.Second)))
	next.Revision = 2
	change, err := natsjs.ChangeOf(next)
	require.NoError(t, err)
	w.ch <- change
	select {
	case a := <-done:
		require.NoError(t, a.err)
		defer a.resp.Body.Close()
		require.Equal(t, http.StatusOK, a.resp.StatusCode)
		require.Equal(t, `"2"`, a.resp.Header.Get("ETag"))
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll was not woken by the change")
	}
	require.NoError(t, g.Stop(context.Background()))
	select {
	case <-w.stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("stopping the gateway did not stop the watch")
	}
}

// staleRecords answers the version before the stored one for its first
// stale reads, as a stream leader that has not yet learned it was replaced.
type staleRecords struct {
	*memRecords
	mu    sync.Mutex
	stale int
	reads int
	older *job.Record
}

func (s *staleRecords) Get(ctx context.Context, key string) (*job.Record, error) {
	s.mu.Lock()
	s.reads++
	if s.stale > 0 {
		s.stale--
		s.mu.Unlock()
		return s.older.Clone(), nil
	}
	s.mu.Unlock()
	return s.memRecords.Get(ctx, key)
}

// A poll carrying the ETag of a version the client was answered (through
// another gateway, say) is never answered with an older one, even when a
// read answers one: it is read again, and if the store stays behind the
// answer is 503 + Retry-After (chaos seed 20261201's revision-backwards:
// queued after running).
func TestAPollIsNeverAnsweredOlderThanItsETag(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	queued := &job.Record{ID: "job_abcdefghijklmnopqrstuvwxyz", Tenant: "4", Requester: "reviewer-47", Type: "permit_report", Params: []byte(`{}`),
		State: job.StateQueued, CreatedAt: now, UpdatedAt: now, Revision: 9266}
	running := queued.Clone()
	require.NoError(t, running.Transition(job.StateRunning, now.Add(time.Second)))
	running.Revision = 9267
	poll := func(g *Gateway, tok, inm string) *http.Response {
		req := httptest.NewRequest(http.MethodGet, "/v1/jobs/"+queued.ID, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("If-None-Match", inm)
		resp, err := g.App().Test(req, -1)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	setup := func(stale int) (*Gateway, string, *staleRecords) {
		store := &staleRecords{memRecords: &memRecords{m: map[string]*job.Record{running.Key(): running.Clone()}}, stale: stale, older: queued}
		g, tok := stubGateway(t, memStores(store, &failingWork{}))
		return g, tok, store
	}

	g, tok, store := setup(3)
	resp := poll(g, tok, `"9267"`)
	require.Equal(t, http.StatusNotModified, resp.StatusCode, "the version the client has, read again")
	require.Equal(t, `"9267"`, resp.Header.Get("ETag"))
	require.Equal(t, 4, store.reads)

	g, tok, _ = setup(3)
	resp = poll(g, tok, `"9100", W/"9267"`)
	require.Equal(t, http.StatusNotModified, resp.StatusCode, "the highest version any tag names")

	g, tok, _ = setup(1 << 30)
	resp = poll(g, tok, `"9267"`)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a store that stays behind")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))

	g, tok, store = setup(1)
	resp = poll(g, tok, `"9200"`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "an older ETag: the version read is newer than it")
	require.Equal(t, `"9266"`, resp.Header.Get("ETag"))
	require.Equal(t, 1, store.reads)
}

// Every store is required: New names the one missing, also when it is a
// nil adapter (what mapping resources without batches would give).
func TestNewNamesAMissingStore(t *testing.T) {
	t.Parallel()
	cfg := Config{AuthSecret: []byte("0123456789abcdef0123456789abcdef")}
	st := memStores(&memRecords{m: map[string]*job.Record{}}, &failingWork{})
	g, err := New(cfg, st, nil)
	require.NoError(t, err)
	require.NoError(t, g.Stop(context.Background()))

	st.Batches = nil
	_, err = New(cfg, st, nil)
	require.EqualError(t, err, "gateway: Stores.Batches is nil: every field is required")
	st.Batches = (*natsjs.BatchStore)(nil)
	_, err = New(cfg, st, nil)
	require.EqualError(t, err, "gateway: Stores.Batches is nil: every field is required")
}
