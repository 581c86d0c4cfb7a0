package gateway

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The hint remembers the last max to 2×max keys and forgets older ones, so
// its memory is bounded however many jobs a gateway admits.
func TestSeenKeysBounded(t *testing.T) {
	t.Parallel()
	s := newSeenKeys(4)
	key := func(i int) string { return "bench.client-1.job_" + strconv.Itoa(i) }
	for i := range 8 {
		s.add(key(i), bodyProof{})
	}
	for i := range 8 {
		require.True(t, s.has(key(i)), "key %d of the last two generations", i)
	}
	require.False(t, s.has(key(8)), "a key never added")
	s.add(key(8), bodyProof{}) // starts a third generation: the first is dropped
	for i := range 4 {
		require.False(t, s.has(key(i)), "key %d of the dropped generation", i)
	}
	for i := 4; i <= 8; i++ {
		require.True(t, s.has(key(i)), "key %d", i)
	}
	require.LessOrEqual(t, s.keys.Len(), 2*4)
}
