package workerhook

import (
	"context"
	"time"
)

// jobgate's endpoint caller (internal/endpointcall) runs the types an
// operator declared (docs/endpoints.md) with pkg/worker, as jobgate's own
// worker: these reach the two things it needs that pkg/worker's API does
// not offer a user's worker.

// Undeclared marks w (a *worker.Workers, before Start) as running types
// that are declared already: Start declares none of them (a declaration
// of the worker's would replace the operator's).
var Undeclared func(w any)

// Failure is the error a handler returns to fail its attempt with kind
// (wire.Kind*), retried or not as retryable says, with user as the
// owner's message (may be empty), cause for the operator and, when
// retried, no next attempt before retryAfter.
var Failure func(kind string, retryable bool, user string, cause error, retryAfter time.Duration) error

// Gate makes every slot of w (a *worker.Workers, before Start) hold a
// pass from gate before it asks for a job, and give it back (release)
// once it has no job: the endpoint caller's slots leased across the
// deployment. An error of gate's waits a moment and asks again.
var Gate func(w any, gate func(ctx context.Context) (release func(), err error))

// Pace makes every regular slot of w (a *worker.Workers, before Start)
// wait for pace before each request for a job, while active says a pace
// holds: the endpoint caller's rate_per_second. While it is active a
// success asks for no next job in the same request (that job would skip
// the pace). An error of pace's waits a moment and asks again.
var Pace func(w any, pace func(ctx context.Context) error, active func() bool)

// Outcomes of an attempt's verdict as Verdict reports them.
const (
	// VerdictRecorded: the broker recorded the verdict (done or fail).
	VerdictRecorded = "recorded"
	// VerdictLost: the broker refused it, the attempt no longer current.
	VerdictLost = "lost"
	// VerdictUnrecorded: none was recorded (no verdict to report, or the
	// broker could not be reached: the claim goes stale and the job is
	// retried).
	VerdictUnrecorded = "unrecorded"
)

// Verdict makes w (a *worker.Workers, before Start) call fn once each
// attempt's verdict was reported, with the job's id, the attempt and the
// outcome (Verdict*): the endpoint caller answers a handler's done or fail
// callback only once the broker has it on record.
var Verdict func(w any, fn func(id string, attempt int, outcome string))
