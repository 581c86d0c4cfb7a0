package gateway

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLimiterPerRequester(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLimiter(2, 3, func() time.Time { return now })
	for range 3 {
		_, ok := l.allow("4/a")
		require.True(t, ok)
	}
	wait, ok := l.allow("4/a")
	require.False(t, ok, "the burst is spent")
	require.Equal(t, 1, wait)
	_, ok = l.allow("4/b")
	require.True(t, ok, "another requester has its own bucket")

	now = now.Add(500 * time.Millisecond) // one token back at 2/s
	_, ok = l.allow("4/a")
	require.True(t, ok)
	_, ok = l.allow("4/a")
	require.False(t, ok, "a refused request took no token, and only one came back")
}

func TestLimiterStaysBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLimiter(10, 5, func() time.Time { return now })
	for i := range limiterCap + 100 {
		_, ok := l.allow("t/" + strconv.Itoa(i))
		require.True(t, ok)
	}
	require.LessOrEqual(t, len(l.b), limiterCap, "the map never grows past the cap")
	now = now.Add(2 * time.Minute) // every bucket full again
	_, _ = l.allow("t/new")
	require.Len(t, l.b, 1, "idle requesters are forgotten at the sweep")
}
