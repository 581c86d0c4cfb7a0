package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
)

// Type declares a job type and its handler. Only Name and Work are
// required; Schema is generated from T when nil.
type Type[T any] struct {
	// Name is the type's name, [a-z][a-z0-9_]{0,63}: what clients send as
	// "type" in POST /v1/jobs.
	Name string
	// Description says what the type produces (GET /v1/types shows it).
	Description string
	// Schema is the JSON Schema (2020-12) of the params. Every string and
	// array in it must be bounded (maxLength, maxItems) and objects closed
	// (additionalProperties false). Nil: generated from T, with bounds
	// from `jsonschema:"maxLength=64"` struct tags.
	Schema json.RawMessage
	// Timeout is the time budget of one attempt. Default 2m.
	Timeout time.Duration
	// Attempts is how many attempts a job gets. Default 3.
	Attempts int
	// MaxResultBytes bounds one job's output. Default 64 MiB.
	MaxResultBytes int64
	// ContentType of the output. Default application/octet-stream.
	ContentType string
	// Concurrency is how many jobs of this type this process runs at once.
	// Default 2.
	Concurrency int
	// Retry spaces a failed job's next attempts: a pause drawn uniformly
	// from [0, min(MaxSeconds, InitialSeconds·Multiplierⁿ⁻¹)). Nil: 30 s,
	// 3600 s, 2.
	Retry *api.RetryPolicy
	// ConcurrencyKeys bound how many jobs of the type with the same key
	// value run at once across the whole deployment, whatever the number
	// of worker processes: a key is "tenant", "requester" or a JSON
	// Pointer into the params ("/params/customer_id"). The others wait
	// queued.
	ConcurrencyKeys []api.ConcurrencyKey
	// RateLimit bounds the attempts of the type started a second across
	// the deployment, for the type or per tenant.
	RateLimit *api.RateLimit
	// Work does one attempt of a job. Its ctx ends when the job is canceled,
	// the attempt's time budget runs out, or the process stops; it should
	// return soon after. Returning nil finishes the job (succeeded) with
	// what was written to j.Output(); an error is retried with backoff
	// unless it is Permanent or the attempts are used up.
	Work func(ctx context.Context, j *Job[T]) error
}

// Register adds a type to w before Start. A process may register any
// number of types; each is pulled from its own queue.
func Register[T any](w *Workers, t Type[T]) error {
	if t.Work == nil {
		return fmt.Errorf("worker: type %q: Work is required", t.Name)
	}
	if wire.Builtin(t.Name) && w.cfg.Credential != wire.JobgateCredential {
		return fmt.Errorf("worker: %s is a built-in type: only jobgate's own workers run it", t.Name)
	}
	if t.Timeout == 0 {
		t.Timeout = api.DefaultTimeout
	}
	if t.Attempts == 0 {
		t.Attempts = api.DefaultAttempts
	}
	if t.MaxResultBytes == 0 {
		t.MaxResultBytes = api.DefaultMaxResultBytes
	}
	if t.ContentType == "" {
		t.ContentType = "application/octet-stream"
	}
	if t.Concurrency == 0 {
		t.Concurrency = api.DefaultConcurrency
	}
	if t.Concurrency < 1 || t.Concurrency > 1024 {
		return fmt.Errorf("worker: type %q: concurrency must be 1 to 1024, got %d", t.Name, t.Concurrency)
	}
	if t.Timeout%time.Second != 0 {
		return fmt.Errorf("worker: type %q: timeout must be whole seconds, got %s", t.Name, t.Timeout)
	}
	schema := t.Schema
	if schema == nil {
		var zero T
		gen, err := generateSchema(zero)
		if err != nil {
			return fmt.Errorf("worker: type %q: %w", t.Name, err)
		}
		schema = gen
	}
	if err := checkSchema(schema); err != nil {
		return fmt.Errorf("worker: type %q: schema: %w", t.Name, err)
	}
	decl := wire.Declaration{
		Name: t.Name, Description: t.Description, Schema: schema,
		TimeoutSeconds: int(t.Timeout / time.Second), Attempts: t.Attempts,
		MaxResultBytes: t.MaxResultBytes, ContentType: t.ContentType,
		Flow: api.Flow{Retry: t.Retry, Concurrency: t.ConcurrencyKeys, RateLimit: t.RateLimit},
	}
	check := api.TypeDecl{Name: decl.Name, Description: decl.Description, Schema: decl.Schema,
		TimeoutSeconds: decl.TimeoutSeconds, Attempts: decl.Attempts, MaxResultBytes: decl.MaxResultBytes,
		ContentType: decl.ContentType, Flow: decl.Flow}
	if err := check.Validate(); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	work := t.Work
	rt := &typeRunner{decl: decl, concurrency: t.Concurrency, run: func(ctx context.Context, a *attempt) error {
		j := &Job[T]{
			ID: a.asg.ID, Type: a.asg.Type, Tenant: a.asg.Tenant, Requester: a.asg.Requester,
			Attempt: a.asg.Attempt, Attempts: a.asg.Attempts, CreatedAt: a.asg.CreatedAt, a: a,
		}
		if err := json.Unmarshal(a.asg.Params, &j.Params); err != nil {
			return Permanent(fmt.Errorf("the job's params do not fit this worker's params type: %v", err))
		}
		return work(ctx, j)
	}}
	return w.add(rt)
}

// typeRunner is a registered type without its params type.
type typeRunner struct {
	decl        wire.Declaration
	concurrency int
	run         func(ctx context.Context, a *attempt) error

	// busy counts the regular slots handling a message; running the jobs
	// of each tenant this process runs (for the newcomer slots).
	busy    atomic.Int64
	mu      sync.Mutex
	running map[string]int
}

// started and ended count a tenant's jobs running in this process.
func (t *typeRunner) started(tenant string) {
	t.mu.Lock()
	if t.running == nil {
		t.running = map[string]int{}
	}
	t.running[tenant]++
	t.mu.Unlock()
}

func (t *typeRunner) ended(tenant string) {
	t.mu.Lock()
	if t.running[tenant]--; t.running[tenant] <= 0 {
		delete(t.running, tenant)
	}
	t.mu.Unlock()
}

// runningJobs counts the type's jobs this process runs now, in regular and
// newcomer slots (hello's busy).
func (t *typeRunner) runningJobs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.running {
		n += c
	}
	return min(n, wire.MaxBusy)
}

// newcomerRequest says whether a newcomer slot may ask for work now (every
// regular slot is busy) and which tenants it must leave out (those with
// jobs running here).
func (t *typeRunner) newcomerRequest() ([]string, bool) {
	if t.busy.Load() < int64(t.concurrency) {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	running := make([]string, 0, len(t.running))
	for tenant := range t.running {
		if len(running) == wire.MaxRunningTenants {
			break
		}
		running = append(running, tenant)
	}
	return running, true
}

var errStarted = errors.New("worker: already started")
