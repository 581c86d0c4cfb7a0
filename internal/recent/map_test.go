package recent

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The map keeps at most twice its bound, keeps what was used lately, and
// Keep carries an old entry's value into the current generation.
func TestMapIsBoundedAndKeepsRecentEntries(t *testing.T) {
	t.Parallel()
	m := New[int, string](4)
	for i := range 20 {
		m.Put(i, "v")
		require.LessOrEqual(t, m.Len(), 8)
	}
	_, ok := m.Get(0)
	require.False(t, ok, "the oldest entries are dropped")
	_, ok = m.Get(19)
	require.True(t, ok)

	m = New[int, string](2)
	m.Put(1, "one")
	m.Put(2, "two")
	m.Put(3, "three") // 1 and 2 are the previous generation now
	m.Keep(1, "other")
	v, ok := m.Get(1)
	require.True(t, ok)
	require.Equal(t, "one", v, "Keep keeps the value an entry has")
	m.Keep(9, "nine")
	v, _ = m.Get(9)
	require.Equal(t, "nine", v)
}
