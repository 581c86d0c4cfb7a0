package job

import (
	"encoding/json"
	"time"
)

// Output describes the stored result of a succeeded job. Object is the name
// in the result object store; it never leaves the server except inside a
// signed link.
type Output struct {
	Object      string `json:"object"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
}

// Record is the one stored document of a job: it is at once the idempotency
// record (scope, fingerprint) and the status record (state, progress, result).
// Admission writes it create-only; every later change is a compare-and-set on
// its revision, so two writers can never both win.
type Record struct {
	ID          string          `json:"id"`
	Tenant      string          `json:"tenant"`
	Requester   string          `json:"requester"`
	KeyHash     string          `json:"key_hash"`
	Fingerprint string          `json:"fingerprint"`
	Type        string          `json:"type"`
	Params      json.RawMessage `json:"params"`
	State       State           `json:"state"`
	Attempt     int             `json:"attempt"`
	// MaxAttempts and TimeoutSeconds are the job type's limits as declared
	// when the job was admitted: a job keeps the rules it was accepted
	// under, and every component reads them from the record. Zero (records
	// written before types were declared) means the deployment's defaults.
	MaxAttempts    int        `json:"max_attempts,omitempty"`
	TimeoutSeconds int        `json:"timeout_seconds,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	RetryAt        *time.Time `json:"retry_at,omitempty"`
	HeartbeatAt    *time.Time `json:"heartbeat_at,omitempty"`
	Worker         string     `json:"worker,omitempty"`
	// ClaimID tells one claim from another: the broker that writes a
	// claim picks it, so when the write's answer is lost it can tell its
	// own claim (which no worker received) from any other.
	ClaimID string `json:"claim_id,omitempty"`
	// Place names the concurrency places the claim holds when they are
	// not named by ClaimID: those of the claim it took over (a stale or
	// lost claim's, kept), or a place handed on to it, without a write,
	// at the verdict of another job's attempt on the same broker
	// (broker/flowbatch.go). Empty: the places are ClaimID's.
	Place string `json:"place,omitempty"`
	// GivenBack counts the attempts given back by their worker without a
	// verdict (a store outage, the worker stopping): they do not use up
	// the job's attempts (AttemptsUsed).
	GivenBack int       `json:"given_back,omitempty"`
	Progress  *Progress `json:"progress,omitempty"`
	Error     *Failure  `json:"error,omitempty"`
	Output    *Output   `json:"output,omitempty"`
	// Attempts is the history of the latest attempts (at most
	// api.MaxAttemptHistory), each with its full error message: the admin
	// API shows it, the job's resource never does.
	Attempts []Attempt `json:"attempts,omitempty"`
	// RetryOf names the job an admin retry made this one from; RetriedAs
	// the job an admin retry of this one made (the only change a terminal
	// record ever gets).
	RetryOf   string `json:"retry_of,omitempty"`
	RetriedAs string `json:"retried_as,omitempty"`
	// Trace and TraceState are the W3C trace context (traceparent,
	// tracestate) of the job's admission span: every later step of the
	// job (its relay, attempts, sweeps, notices) is traced as a child of
	// it, whichever process takes the step (internal/tracing).
	Trace      string `json:"trace,omitempty"`
	TraceState string `json:"trace_state,omitempty"`
	// Batch names the batch this job is an item of (set at admission from
	// the batch record, never changed); BatchNotify is the batch's notice
	// choice when it is not the default one notice per batch ("each").
	Batch       string `json:"batch,omitempty"`
	BatchNotify string `json:"batch_notify,omitempty"`
	// RunAt, Priority and StartBy are the job's flow fields, as admitted
	// (a delay resolved to its run_at) and never changed: no attempt starts
	// before RunAt, a job of a lower Priority number waits less (1 first, 5
	// last; 0 is the default, 3), and one not started by StartBy is
	// canceled deadline_exceeded.
	RunAt    *time.Time `json:"run_at,omitempty"`
	Priority int        `json:"priority,omitempty"`
	StartBy  *time.Time `json:"start_by,omitempty"`

	// Revision is the store's revision of this record; it is not part of the
	// stored document and is what compare-and-set updates are made against.
	Revision uint64 `json:"-"`
}

// Key is the record's store key. It includes tenant and requester so a read
// scoped to the caller cannot reach another requester's job by construction.
func (r *Record) Key() string { return StoreKey(r.Tenant, r.Requester, r.ID) }

// StoreKey joins the scope and id into the record's store key.
func StoreKey(tenant, requester, id string) string {
	return tenant + "." + requester + "." + id
}

// DefaultPriority is the priority of a job that names none.
const DefaultPriority = 3

// PriorityOr is the job's priority, 1 (first) to 5 (last), the default
// for a record that carries none.
func (r *Record) PriorityOr() int {
	if r.Priority == 0 {
		return DefaultPriority
	}
	return r.Priority
}

// Clone returns a deep enough copy to mutate for a compare-and-set.
func (r *Record) Clone() *Record {
	c := *r
	if r.Progress != nil {
		p := *r.Progress
		c.Progress = &p
	}
	if r.Error != nil {
		e := *r.Error
		c.Error = &e
	}
	if r.Output != nil {
		o := *r.Output
		c.Output = &o
	}
	if r.Attempts != nil {
		c.Attempts = make([]Attempt, len(r.Attempts))
		for i, a := range r.Attempts {
			if a.EndedAt != nil {
				t := *a.EndedAt
				a.EndedAt = &t
			}
			if a.Error != nil {
				e := *a.Error
				a.Error = &e
			}
			c.Attempts[i] = a
		}
	}
	return &c
}

// Transition moves the record to next at now, enforcing the state rules and
// stamping the timestamps the resource shows.
func (r *Record) Transition(next State, now time.Time) error {
	if !r.State.CanTransition(next) {
		return &TransitionError{From: r.State, To: next}
	}
	now = now.UTC()
	if next == StateRunning && r.StartedAt == nil {
		r.StartedAt = &now
	}
	if next.Terminal() {
		r.FinishedAt = &now
		r.RetryAt = nil
	}
	r.State = next
	r.UpdatedAt = now
	return nil
}

// TransitionError reports an illegal state change; it matches ErrInvalidState.
type TransitionError struct{ From, To State }

func (e *TransitionError) Error() string {
	return "invalid transition from " + string(e.From) + " to " + string(e.To)
}

// Is lets errors.Is(err, ErrInvalidState) match.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidState }
