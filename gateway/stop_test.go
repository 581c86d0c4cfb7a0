package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// stuckRecords is a record store whose Create waits for release, ignoring
// its context: a request the gateway cannot finish.
type stuckRecords struct {
	memRecords
	entered chan struct{}
	release chan struct{}
}

func (s *stuckRecords) Create(context.Context, *job.Record) error {
	close(s.entered)
	<-s.release
	return job.ErrUnavailable
}

func listeningStub(t *testing.T, st Stores) (*Gateway, string) {
	t.Helper()
	secret := []byte("0123456789abcdef0123456789abcdef")
	st.Changes = noChanges{context.Canceled}
	g, err := newGateway(Config{AuthSecret: secret, Addr: "127.0.0.1:0"}, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NoError(t, g.Start(context.Background()))
	t.Cleanup(func() { _ = g.Stop(context.Background()) })
	tok, err := auth.Mint(secret, auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour, time.Now())
	require.NoError(t, err)
	return g, tok
}

// A request in flight that outlasts Stop's deadline does not hold Stop: it
// returns, in time, an error that says the drain was cut short; a second
// Stop says the same.
func TestStopReturnsAtItsDeadline(t *testing.T) {
	t.Parallel()
	store := &stuckRecords{memRecords: memRecords{m: map[string]*job.Record{}}, entered: make(chan struct{}), release: make(chan struct{})}
	g, tok := listeningStub(t, memStores(store, &failingWork{}))
	t.Cleanup(func() { close(store.release) })
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr()+"/v1/jobs",
			strings.NewReader(`{"type":"permit_report","params":{"case_id":47,"revision":29}}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "stuck")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-store.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the submission never reached the store")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := g.Stop(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(began), 3*time.Second, "Stop outlived its deadline")
	require.ErrorIs(t, g.Stop(context.Background()), context.DeadlineExceeded, "a second Stop says how the first ended")
}

// Stop before Start and a second Stop return nil; a stopped gateway does
// not start.
func TestStopBeforeStartAndTwice(t *testing.T) {
	t.Parallel()
	g, err := newGateway(Config{AuthSecret: []byte("0123456789abcdef0123456789abcdef"), Addr: "127.0.0.1:0"},
		memStores(&memRecords{m: map[string]*job.Record{}}, &failingWork{}), nil)
	require.NoError(t, err)
	require.NoError(t, g.Stop(context.Background()))
	require.NoError(t, g.Stop(context.Background()))
	require.Error(t, g.Start(context.Background()))

	started, _ := listeningStub(t, memStores(&memRecords{m: map[string]*job.Record{}}, &failingWork{}))
	require.NoError(t, started.Stop(context.Background()))
	require.NoError(t, started.Stop(context.Background()))
}
