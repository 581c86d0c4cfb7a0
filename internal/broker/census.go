package broker

import (
	"strings"

	"github.com/jobgate/jobgate/internal/natsjs"
)

// FlowWaiting is what this broker sees of the jobs held back by their
// type's flow control: the work messages it has parked (park.go), by type
// and tenant. Every broker reads every lane, so each sees the same waiting
// jobs (as far as it has read): aggregate the brokers' figures with max,
// not sum. A message being looked at again, or past maxParkedKeys, is not
// counted. Its cost is one pass over the parked messages, under each
// type's lock.
func (b *Broker) FlowWaiting() natsjs.FlowWaiting {
	b.mu.Lock()
	scheds := make([]*sched, 0, len(b.scheds))
	for _, s := range b.scheds {
		scheds = append(scheds, s)
	}
	b.mu.Unlock()
	out := natsjs.FlowWaiting{}
	for _, s := range scheds {
		s.countParked(out)
	}
	return out
}

// countParked adds s's parked messages, still deferred in their lane, to
// out.
func (s *sched) countParked(out natsjs.FlowWaiting) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, q := range s.parked {
		rate := strings.HasPrefix(key, "fr.")
		for _, p := range q.msgs {
			t := s.tenants[p.tenant]
			if t == nil {
				continue
			}
			l := t.lanes[p.requester]
			if l == nil {
				continue
			}
			if _, ok := l.deferred[p.seq]; !ok {
				continue // settled meanwhile
			}
			byTenant := out[s.typ]
			if byTenant == nil {
				byTenant = map[string]natsjs.WaitingCounts{}
				out[s.typ] = byTenant
			}
			c := byTenant[p.tenant]
			if rate {
				c.Rate++
			} else {
				c.Concurrency++
			}
			byTenant[p.tenant] = c
		}
	}
}
