package index

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// chanSource is a change log fed by the test: every change it is given
// reaches the index in the order given, as fast as the index reads.
type chanSource struct {
	mu      sync.Mutex
	last    uint64
	changes chan natsjs.RecordChange
}

func (s *chanSource) LogBounds(context.Context) (natsjs.LogBounds, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return natsjs.LogBounds{First: 1, Last: s.last}, nil
}

func (s *chanSource) ReadLog(context.Context, uint64) (Log, error) {
	return &chanLog{c: s.changes, stop: make(chan struct{})}, nil
}

func (s *chanSource) send(t *testing.T, r *job.Record) {
	t.Helper()
	c, err := natsjs.ChangeOf(r)
	require.NoError(t, err)
	s.mu.Lock()
	s.last = max(s.last, r.Revision)
	s.mu.Unlock()
	s.changes <- c
}

type chanLog struct {
	c    chan natsjs.RecordChange
	stop chan struct{}
	once sync.Once
}

func (l *chanLog) Next() (natsjs.RecordChange, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.stop:
		return natsjs.RecordChange{}, errors.New("stopped")
	}
}

func (l *chanLog) Stop() { l.once.Do(func() { close(l.stop) }) }

// A job admitted, claimed and finished within one batch of the change log
// is indexed as it ended, and counted once among the finishes.
func TestChangesOfOneJobInOneBatchEndWhereTheJobIs(t *testing.T) {
	t.Parallel()
	src := &chanSource{changes: make(chan natsjs.RecordChange, 16)}
	now := time.Now().UTC()
	r := &job.Record{ID: "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", Tenant: "4", Requester: "alice", Type: "permit_report",
		Params: []byte(`{}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now, Revision: 1}
	other := &job.Record{ID: "job_bbbbbbbbbbbbbbbbbbbbbbbbbb", Tenant: "4", Requester: "bob", Type: "permit_report",
		Params: []byte(`{}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now, Revision: 2}
	src.send(t, r)
	src.send(t, other)
	running := r.Clone()
	require.NoError(t, running.Claim("w", now))
	running.Revision = 3
	src.send(t, running)
	done := running.Clone()
	require.NoError(t, done.Succeed(nil, now))
	done.Revision = 4
	src.send(t, done)

	x, err := Open(filepath.Join(t.TempDir(), "index.db"), src, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Close() })
	require.NoError(t, x.CatchUp(context.Background(), 10*time.Second))

	e, ok := x.Lookup(r.ID)
	require.True(t, ok)
	require.Equal(t, job.StateSucceeded, e.State)
	stats, err := x.Stats("4", now)
	require.NoError(t, err)
	require.Len(t, stats, 1)
	require.EqualValues(t, 1, stats[0].Queued, "the other job")
	require.EqualValues(t, 0, stats[0].Running)
	require.EqualValues(t, 1, stats[0].LastHour.Succeeded)
	p, err := x.Page(Query{Tenant: "4", State: job.StateQueued, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{other.ID}, ids(p))
}

// A batch lingers for more changes only while nobody reads: a reader
// waiting for the index to catch up ends the linger at once, however long
// it is, so a list sees its own writes without the batching's lag.
func TestAWaitingReaderEndsTheBatchLinger(t *testing.T) {
	t.Parallel()
	src := &chanSource{changes: make(chan natsjs.RecordChange, 16)}
	x, err := Open(filepath.Join(t.TempDir(), "index.db"), src, Options{Linger: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Close() })
	now := time.Now().UTC()
	for i, id := range []string{"job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "job_bbbbbbbbbbbbbbbbbbbbbbbbbb"} {
		src.send(t, &job.Record{ID: id, Tenant: "4", Requester: "alice", Type: "permit_report",
			Params: []byte(`{}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now, Revision: uint64(i + 1)})
		// The second change arrives while the applier lingers over the
		// first's batch (or after it applied it): either way the reader is
		// answered within its deadline, not the hour's linger.
		require.NoError(t, x.CatchUp(context.Background(), 10*time.Second), "change %d", i+1)
		_, ok := x.Lookup(id)
		require.True(t, ok, id)
	}
}
