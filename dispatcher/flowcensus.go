package dispatcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"reflect"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
)

// The flow census (natsjs/flowcensus.go): every flowCensusEvery the
// dispatcher writes what its broker has parked (the jobs waiting for a
// concurrency place or a rate token) to its census entry, which the
// gateways' admin stats read, and sets the flow gauges: the jobs it sees
// waiting and the places in use across the deployment. A census that did
// not change is written again only before the entry would run out.
var flowCensusEvery = 2 * time.Second

// flowCensusRewrite: an unchanged census is written again this often, well
// within the entry's age limit (natsjs.SlotTTL).
const flowCensusRewrite = natsjs.SlotTTL / 3

// Metric labels of jobgate_flow_waiting_jobs.
const (
	reasonConcurrency = "concurrency"
	reasonRate        = "rate_limit"
)

type flowCensus struct {
	d       *Dispatcher
	slots   *natsjs.SlotStore
	id      string
	last    natsjs.FlowWaiting
	wroteAt time.Time
	// the gauges' series set last time, set to 0 when gone
	inUse, waiting map[string]map[string]int
}

// startFlowCensus runs the census until runCtx ends.
func (d *Dispatcher) startFlowCensus(_, runCtx context.Context) (func(), error) {
	slots := d.slots
	if slots == nil {
		return func() {}, nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	c := &flowCensus{d: d, slots: slots, id: hex.EncodeToString(b[:])}
	d.spawn(func() {
		t := time.NewTicker(flowCensusEvery)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				// Gone: the entry says nothing waits here any more.
				ctx, cancel := context.WithTimeout(d.force, time.Second)
				if len(c.last) > 0 {
					_ = c.slots.PutWaiting(ctx, c.id, nil)
				}
				cancel()
				return
			case <-t.C:
				c.tick(runCtx)
			}
		}
	})
	return func() {}, nil
}

func (c *flowCensus) tick(ctx context.Context) {
	now := c.d.cfg.Now()
	w := c.d.broker.FlowWaiting()
	if !reflect.DeepEqual(w, c.last) || len(w) > 0 && now.Sub(c.wroteAt) >= flowCensusRewrite {
		octx, cancel := opCtx(ctx)
		err := c.slots.PutWaiting(octx, c.id, w)
		cancel()
		if err != nil {
			c.d.log.Debug("flow census not written", "err", err)
		} else {
			c.last, c.wroteAt = w, now
		}
	}
	if c.d.cfg.Metrics == nil {
		return
	}
	waiting := map[string]map[string]int{}
	for typ, tenants := range w {
		by := map[string]int{reasonConcurrency: 0, reasonRate: 0}
		for _, n := range tenants {
			by[reasonConcurrency] += n.Concurrency
			by[reasonRate] += n.Rate
		}
		waiting[typ] = by
	}
	octx, cancel := opCtx(ctx)
	inUse, err := c.slots.PlacesInUse(octx, now)
	cancel()
	if err != nil {
		c.d.log.Debug("concurrency places not counted", "err", err)
		inUse = c.inUse // the last figures stand
	}
	c.inUse, c.waiting = withGone(inUse, c.inUse), withGone(waiting, c.waiting)
	c.d.cfg.Metrics.SetFlowCensus(c.inUse, c.waiting)
	c.inUse, c.waiting = inUse, waiting
}

// withGone is now plus a 0 for each series of before not in it.
func withGone(now, before map[string]map[string]int) map[string]map[string]int {
	out := make(map[string]map[string]int, len(now))
	for typ, by := range now {
		out[typ] = maps.Clone(by)
	}
	for typ, by := range before {
		for label := range by {
			if _, ok := out[typ][label]; !ok {
				if out[typ] == nil {
					out[typ] = map[string]int{}
				}
				out[typ][label] = 0
			}
		}
	}
	return out
}
