package broker

import (
	"container/list"
	"strconv"
	"testing"
	"time"
)

// A pick in memory (no read): 10 tenants of 100 requesters each, every
// lane with work of the default priority, and, when prioritized, every
// tenant's requesters spread over the five priorities. What the choice of
// tenant and requester costs a job.
func BenchmarkPick(b *testing.B) {
	for _, prioritized := range []bool{false, true} {
		b.Run("prioritized="+strconv.FormatBool(prioritized), func(b *testing.B) {
			s := &sched{b: &Broker{cfg: testConfig()}, tenants: map[string]*tenantQ{}, waiters: list.New(),
				wake: make(chan struct{}), news: make(chan struct{})}
			for t := range 10 {
				for r := range 100 {
					l := s.laneLocked("t"+strconv.Itoa(t), "r"+strconv.Itoa(r))
					p := 3
					if prioritized {
						p = 1 + r%5
					}
					l.works, l.work = l.works.with(p), true
				}
			}
			now := time.Now()
			b.ResetTimer()
			for range b.N {
				t, _, _ := s.pick(now, nil)
				s.unreserveLocked(t.name)
			}
		})
	}
}
