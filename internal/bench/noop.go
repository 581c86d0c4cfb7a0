package bench

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	jgapi "github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/worker"
)

// NoopType is the job type of the pipeline section: a worker written with
// pkg/worker whose handler does nothing, so what is measured is jobgate's
// own cost of a job (admission, relay, claim, final write, events,
// notices) and not a render.
const NoopType = "bench_noop"

// noopSchema is flat (one bounded integer), so admission takes the
// schema package's fast path as most real types would.
var noopSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":0},"at":{"type":"integer","minimum":0}},"additionalProperties":false}`)

// noopParams are bench_noop's params: At, when set, is the job's run_at in
// Unix milliseconds (the flow section's scheduled jobs), and the wait the
// worker records is from it rather than from admission.
type noopParams struct {
	N  int   `json:"n"`
	At int64 `json:"at,omitempty"`
}

// Noop counts the bench_noop jobs the target's worker finished and how long
// each waited from admission to its handler (queued → claimed).
type Noop struct {
	// Flow declares bench_noop with flow control (the flow section): a
	// concurrency key per requester, limit 1,000 (never reached by its
	// 100 slots), and a rate limit of 10,000/s for the type (one bucket
	// every start takes a token of): what the limits cost when they do not
	// hold a job back.
	// FlowOnly, with Flow, declares only "concurrency" or only "rate", or
	// neither ("fields": the flow side's jobs still carry priority and
	// start_by), to tell their costs apart by hand (JOBGATE_BENCH_NOOP_FLOW).
	Flow      bool
	FlowOnly  string
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
	t := worker.Type[noopParams]{
		Name: NoopType, Description: "does nothing (jobgate bench)", Schema: noopSchema,
		Timeout: 30 * time.Second, Attempts: 3, Concurrency: concurrency,
		Work: func(_ context.Context, j *worker.Job[noopParams]) error {
			wait := time.Since(j.CreatedAt)
			if j.Params.At > 0 {
				wait = time.Since(time.UnixMilli(j.Params.At))
			}
			n.mu.Lock()
			if len(n.waits) < 1<<20 {
				n.waits = append(n.waits, wait)
			}
			n.mu.Unlock()
			return nil
		},
	}
	if n.Flow && n.FlowOnly != "rate" && n.FlowOnly != "fields" {
		t.ConcurrencyKeys = []jgapi.ConcurrencyKey{{Key: jgapi.KeyRequester, Limit: 1000}}
	}
	if n.Flow && n.FlowOnly != "concurrency" && n.FlowOnly != "fields" {
		t.RateLimit = &jgapi.RateLimit{PerSecond: 10000, Burst: 10000, Key: jgapi.KeyType}
	}
	return worker.Register(w, t)
}

// takeWaits returns the queued → claimed waits recorded since the last call.
func (n *Noop) takeWaits() []time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.waits
	n.waits = nil
	return w
}
