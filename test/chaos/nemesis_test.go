package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A seed replays the same fault schedule; lanes other than the first never
// touch the NATS nodes (procs[:3]); the schedule fits in the duration.
func TestPlanIsSeededAndKeepsQuorum(t *testing.T) {
	o := &Options{Duration: 10 * time.Minute}
	o.Defaults()
	a, b := plan(42, 1, 3, 9, o), plan(42, 1, 3, 9, o)
	require.Equal(t, a, b)
	require.NotEqual(t, a, plan(43, 1, 3, 9, o))
	require.NotEmpty(t, a)
	var total time.Duration
	kinds := map[string]int{}
	for _, f := range a {
		require.GreaterOrEqual(t, f.target, 3, "lane 1 touched a NATS node")
		total += f.after + f.hold
		kinds[f.action]++
	}
	require.LessOrEqual(t, total, o.Duration)
	require.Positive(t, kinds["kill"])
	require.Positive(t, kinds["stop"])
	nats := 0
	for _, f := range plan(42, 0, 0, 9, o) {
		if f.target < 3 {
			nats++
		}
	}
	require.Positive(t, nats, "lane 0 also faults NATS nodes")
}

// Ports for processes that restart come from below the ephemeral range.
func TestFreePortsBelowEphemeralRange(t *testing.T) {
	ports, err := freePorts(11)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range ports {
		require.False(t, seen[p])
		seen[p] = true
		require.Less(t, p, ephemeralLow())
	}
}
