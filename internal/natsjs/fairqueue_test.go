package natsjs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func fairQueueWith(weights map[string]int, tenants ...string) *FairQueue {
	q := &FairQueue{cfg: FairConfig{Weights: weights}, tenants: map[string]*tenantQueue{}}
	for _, name := range tenants {
		q.tenants[name] = &tenantQueue{name: name, weight: q.cfg.weight(name), pending: true, fresh: true}
	}
	return q
}

func picks(q *FairQueue, n int) []string {
	var out []string
	for range n {
		out = append(out, q.pick(nil).name)
	}
	return out
}

func TestPickSharesSlotsByWeight(t *testing.T) {
	t.Parallel()
	q := fairQueueWith(map[string]int{"heavy": 3}, "heavy", "light")
	got := picks(q, 8)
	count := map[string]int{}
	for _, name := range got {
		count[name]++
	}
	require.Equal(t, map[string]int{"heavy": 6, "light": 2}, count, "picks %v", got)
	for i := 0; i+3 < len(got); i++ {
		require.Contains(t, got[i:i+4], "light", "light waits at most 3 picks: %v", got)
	}
	require.Equal(t, []string{"a", "b", "a", "b"}, picks(fairQueueWith(nil, "a", "b"), 4))
}

func TestATenantWhoseWorkComesBackTakesTheNextPick(t *testing.T) {
	t.Parallel()
	q := fairQueueWith(nil, "flood")
	require.Equal(t, []string{"flood", "flood", "flood"}, picks(q, 3))
	// A tenant with work again (a scan marks it fresh) goes first, then
	// the two alternate.
	q.tenants["trickle"] = &tenantQueue{name: "trickle", weight: 1, pending: true, fresh: true}
	require.Equal(t, []string{"trickle", "flood", "trickle", "flood"}, picks(q, 4))
	q.tenants["trickle"].pending = false
	require.Equal(t, []string{"flood", "flood"}, picks(q, 2))
	q.tenants["trickle"].pending, q.tenants["trickle"].fresh = true, true
	require.Equal(t, "trickle", q.pick(nil).name)
	// No tenant with work: no pick.
	for _, tq := range q.tenants {
		tq.pending = false
	}
	require.Nil(t, q.pick(nil))
}
