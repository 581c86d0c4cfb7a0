package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
)

// endpointDone follows, inside the target, the events of the endpoints
// section's tenant and keeps, for each job that succeeded, how long it
// took from its admission (created_at) to its success (finished_at): both
// stamps are the record's, so the figure is the whole path as stored. A
// core subscription on the events' subjects sees every event as it is
// stored, and costs the target one decode per succeeded event.
type endpointDone struct {
	sub *nats.Subscription

	mu    sync.Mutex
	count int64
	waits []time.Duration
}

// succeededMark picks the events worth decoding.
var succeededMark = []byte(`"state":"succeeded"`)

func (t *target) endpointDone(tenant string) (*endpointDone, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.epDone != nil {
		return t.epDone, nil
	}
	if t.env.Res == nil || t.env.Res.JS == nil {
		return nil, errors.New("no JetStream in this target")
	}
	d := &endpointDone{}
	sub, err := t.env.Res.JS.Conn().Subscribe(natsjs.TenantEvents(tenant), func(m *nats.Msg) {
		wait, ok := succeededAfter(m.Data, EndpointType)
		if !ok {
			return
		}
		d.mu.Lock()
		d.count++
		if len(d.waits) < 1<<21 {
			d.waits = append(d.waits, wait)
		}
		d.mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	sub.SetPendingLimits(-1, -1) // a slow count must not drop events
	d.sub = sub
	t.epDone = d
	return d, nil
}

// succeededAfter reads a job event (the job's resource, as stored on
// JOBGATE_EVENTS): for a job of typ that succeeded, how long after its
// admission; false for any other event.
func succeededAfter(data []byte, typ string) (time.Duration, bool) {
	if !bytes.Contains(data, succeededMark) {
		return 0, false
	}
	var ev struct {
		Type       string     `json:"type"`
		State      string     `json:"state"`
		CreatedAt  time.Time  `json:"created_at"`
		FinishedAt *time.Time `json:"finished_at"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Type != typ || ev.State != "succeeded" || ev.FinishedAt == nil {
		return 0, false
	}
	return ev.FinishedAt.Sub(ev.CreatedAt), true
}

// take returns the successes seen since the last call.
func (d *endpointDone) take() (int64, []time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, w := d.count, d.waits
	d.count, d.waits = 0, nil
	return n, w
}
