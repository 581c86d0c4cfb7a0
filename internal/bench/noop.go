package bench

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/pkg/worker"
)

// NoopType is the job type of the pipeline section: a worker written with
// pkg/worker whose handler does nothing, so what is measured is jobgate's
// own cost of a job (admission, relay, claim, final write, events,
// notices) and not a render.
const NoopType = "bench_noop"

// noopSchema is flat (one bounded integer), so admission takes the
// schema package's fast path as most real types would.
var noopSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":0}},"additionalProperties":false}`)

// noopParams are bench_noop's params.
type noopParams struct {
	N int `json:"n"`
}

// Noop counts the bench_noop jobs the target's worker finished and how long
// each waited from admission to its handler (queued → claimed).
type Noop struct {
	succeeded atomic.Int64
	mu        sync.Mutex
	waits     []time.Duration
}

// OnAttempt is the worker.Config hook that counts finished jobs: it runs
// after the job's succeeded record was written and its work acknowledged.
func (n *Noop) OnAttempt(typ, outcome string, _ time.Duration) {
	if typ == NoopType && outcome == "succeeded" {
		n.succeeded.Add(1)
	}
}

// Register declares bench_noop on w with concurrency handler slots.
func (n *Noop) Register(w *worker.Workers, concurrency int) error {
	return worker.Register(w, worker.Type[noopParams]{
		Name: NoopType, Description: "does nothing (jobgate bench)", Schema: noopSchema,
		Timeout: 30 * time.Second, Attempts: 3, Concurrency: concurrency,
		Work: func(_ context.Context, j *worker.Job[noopParams]) error {
			wait := time.Since(j.CreatedAt)
			n.mu.Lock()
			if len(n.waits) < 1<<20 {
				n.waits = append(n.waits, wait)
			}
			n.mu.Unlock()
			return nil
		},
	})
}

// takeWaits returns the queued → claimed waits recorded since the last call.
func (n *Noop) takeWaits() []time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.waits
	n.waits = nil
	return w
}
