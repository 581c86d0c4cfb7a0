package dispatcher

import (
	"context"
	"time"
)

// observeGauges refreshes the open-job and relay-backlog gauges; the
// sweeper calls it each round, so it costs one consumer-info request per
// sweep interval.
func (d *Dispatcher) observeGauges(ctx context.Context) {
	if d.cfg.Metrics == nil {
		return
	}
	for state, n := range d.running.counts() {
		d.cfg.Metrics.SetJobs(string(state), n)
	}
	d.cfg.Metrics.SetTenantQueues(d.running.queuedByTenant(), time.Now())
	if d.relayLog == nil {
		return
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	if n, err := d.relayLog.Backlog(octx); err == nil {
		d.cfg.Metrics.SetRelayBacklog(n)
	}
}
