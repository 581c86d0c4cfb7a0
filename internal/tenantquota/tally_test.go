package tenantquota

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// store stands for the result objects a reading finds.
type store struct {
	mu   sync.Mutex
	use  map[string]int64
	err  error
	hold chan struct{} // when set, a reading waits for it
}

func (s *store) read(ctx context.Context) (map[string]int64, error) {
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	out := map[string]int64{}
	for k, v := range s.use {
		out[k] = v
	}
	return out, nil
}

func (s *store) set(tenant string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.use[tenant] = n
}

func newTally(t *testing.T, max int64, s *store) *Tally {
	t.Helper()
	q, err := New(Config{MaxBytes: max, Read: s.read})
	require.NoError(t, err)
	return q
}

// Uploads under way reserve their bytes chunk by chunk: two at once cannot
// together take a tenant past its quota, and another tenant is not touched.
func TestReserveRefusesWhatWouldPassTheQuota(t *testing.T) {
	t.Parallel()
	s := &store{use: map[string]int64{"a": 600}}
	q := newTally(t, 1000, s)
	require.NoError(t, q.Refresh(context.Background()))

	ok, used := q.Reserve("a", 300)
	require.True(t, ok)
	require.EqualValues(t, 900, used)
	ok, used = q.Reserve("a", 101)
	require.False(t, ok, "a second upload under way sees the first one's bytes")
	require.EqualValues(t, 900, used)
	ok, _ = q.Reserve("a", 100)
	require.True(t, ok, "up to the quota itself fits")
	ok, _ = q.Reserve("b", 1000)
	require.True(t, ok, "another tenant has its own quota")

	q.Release("a", 100, false)
	require.EqualValues(t, 900, q.Used("a"), "an upload that was not stored frees its bytes")
	ok, _ = q.Reserve("a", 0)
	require.True(t, ok, "an empty chunk always fits")
}

// A result this process stored counts until a reading that began after it
// was stored finds it: never twice after that, never not at all before.
func TestOwnResultsCountUntilAReadingFindsThem(t *testing.T) {
	t.Parallel()
	s := &store{use: map[string]int64{}}
	q := newTally(t, 1000, s)
	require.NoError(t, q.Refresh(context.Background()))

	ok, _ := q.Reserve("a", 400)
	require.True(t, ok)
	q.Release("a", 400, true)
	require.EqualValues(t, 400, q.Used("a"), "stored, not yet read")

	// A reading under way when the next result is stored may miss it.
	hold := make(chan struct{})
	s.mu.Lock()
	s.hold = hold
	s.mu.Unlock()
	s.set("a", 400)
	done := make(chan error, 1)
	go func() { done <- q.Refresh(context.Background()) }()
	require.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.before) == 1
	}, 5*time.Second, time.Millisecond, "the reading began")
	ok, _ = q.Reserve("a", 100)
	require.True(t, ok)
	q.Release("a", 100, true)
	close(hold)
	require.NoError(t, <-done)
	require.EqualValues(t, 500, q.Used("a"), "the first result is read, the second still this process's own")

	s.mu.Lock()
	s.hold = nil
	s.mu.Unlock()
	s.set("a", 500)
	require.NoError(t, q.Refresh(context.Background()))
	require.EqualValues(t, 500, q.Used("a"), "read once, counted once")

	// A failed reading keeps the last one and this process's own count.
	ok, _ = q.Reserve("a", 200)
	require.True(t, ok)
	q.Release("a", 200, true)
	s.mu.Lock()
	s.err = errors.New("no responders")
	s.mu.Unlock()
	require.Error(t, q.Refresh(context.Background()))
	require.EqualValues(t, 700, q.Used("a"))

	// Objects deleted or expired are gone from the next reading.
	s.mu.Lock()
	s.err = nil
	s.use = map[string]int64{}
	s.mu.Unlock()
	require.NoError(t, q.Refresh(context.Background()))
	require.EqualValues(t, 0, q.Used("a"))
	q.mu.Lock()
	defer q.mu.Unlock()
	require.Empty(t, q.before)
	require.Empty(t, q.since)
	require.Empty(t, q.flight, "nothing is kept for a tenant with nothing stored")
}

// Run reads at once and stops with its context; a nil tally refuses nothing.
func TestRunReadsAtOnceAndEndsWithItsContext(t *testing.T) {
	t.Parallel()
	s := &store{use: map[string]int64{"a": 1000}}
	read := make(chan map[string]int64, 1)
	q, err := New(Config{MaxBytes: 1000, Read: s.read, OnRead: func(use map[string]int64) { read <- use }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() { q.Run(ctx); close(ended) }()
	select {
	case use := <-read:
		require.EqualValues(t, 1000, use["a"])
	case <-time.After(5 * time.Second):
		t.Fatal("no reading at start")
	}
	ok, _ := q.Reserve("a", 1)
	require.False(t, ok)
	cancel()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end with its context")
	}

	var none *Tally
	ok, _ = none.Reserve("a", 1<<40)
	require.True(t, ok)
	none.Release("a", 1<<40, true)
	require.Zero(t, none.Used("a"))
	_, err = New(Config{MaxBytes: 0, Read: s.read})
	require.Error(t, err, "a quota must be positive")
}
