package workertest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jobgate/jobgate/internal/canon"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/internal/verdict"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/internal/workerhook"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/worker"
)

// Outcome is how an attempt ended for the job.
type Outcome string

const (
	// Succeeded: the job succeeded with Result.Output as its result.
	Succeeded Outcome = "succeeded"
	// Retry: this attempt failed and jobgate tries again, after a backoff,
	// because the failure allows it and attempts remain (a plain error, a
	// timeout).
	Retry Outcome = "retry"
	// Failed: the job failed for good (worker.Permanent, a panic, a result
	// over the type's MaxResultBytes, or a retryable failure on the last
	// attempt).
	Failed Outcome = "failed"
	// Lost: the attempt reached no verdict because ctx ended before the
	// handler returned, as when the job's owner cancels it; jobgate records
	// nothing of the attempt's result.
	Lost Outcome = "lost"
)

// Result is one attempt as jobgate would record it.
type Result struct {
	Outcome Outcome
	// Output is what the handler wrote to j.Output() (nil: nothing).
	Output []byte
	// Progress is the last progress the handler reported with
	// j.Progress, what the job shows when the attempt ends (nil: none).
	Progress *api.Progress
	// Error is the job's "error" as its owner would read it (category,
	// message, retryable) when the attempt failed: the message is the one
	// the handler wrote for users (worker.Permanent, worker.Fail) or
	// jobgate's generic one of the category. Nil when it succeeded.
	Error *api.Failure
	// Err is what the handler returned: the cause the operator reads in
	// the logs. Nil when it returned nil.
	Err error
}

// Attempt is the job one attempt sees; zero fields take the defaults named
// on each.
type Attempt struct {
	// ID, Tenant, Requester: default "job_workertest", "tenant-1",
	// "requester-1".
	ID, Tenant, Requester string
	// Number is the attempt's number, from 1 (default 1); Of is how many
	// the job gets (default: the type's Attempts). On the last attempt a
	// retryable failure fails the job.
	Number, Of int
	// CreatedAt is when the job was admitted. Default: now.
	CreatedAt time.Time
	// Logger receives the handler's j.Logger() lines. Default: discarded.
	Logger *slog.Logger
}

// Run runs one attempt of a job of type t with params, in this process and
// without NATS: the params are validated against the type's schema and its
// defaults applied, as the gateway does on admission, then decoded into T;
// the handler runs within the type's Timeout with its output kept in
// memory (up to MaxResultBytes); its return is classified as pkg/worker
// and jobgate classify it. params is anything encoding/json marshals to
// the params object: a T, a map, a json.RawMessage.
//
// The error is nil unless the attempt could not be run as jobgate would
// run it: a type Register refuses, params the schema refuses (a
// *api.ValidationError, which jobgate answers 422 on submission), or a
// failure report jobgate would refuse.
func Run[T any](ctx context.Context, t worker.Type[T], params any) (*Result, error) {
	return RunAttempt(ctx, t, params, Attempt{})
}

// RunAttempt is Run for the attempt a describes.
func RunAttempt[T any](ctx context.Context, t worker.Type[T], params any, a Attempt) (*Result, error) {
	log := a.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w, err := worker.New(worker.Config{Name: "workertest", Logger: log})
	if err != nil {
		return nil, err
	}
	if err := worker.Register(w, t); err != nil {
		return nil, err
	}
	decl := workerhook.Declarations(w)[0]
	applied, err := admit(decl, params)
	if err != nil {
		return nil, err
	}
	asg := &wire.Assignment{
		Key: "workertest", Token: "workertest", ID: or(a.ID, "job_workertest"), Type: decl.Name,
		Tenant: or(a.Tenant, "tenant-1"), Requester: or(a.Requester, "requester-1"),
		Attempt: max(a.Number, 1), Attempts: a.Of, CreatedAt: a.CreatedAt, Params: applied,
		TimeoutMS: int64(decl.TimeoutSeconds) * 1000, MaxResultBytes: decl.MaxResultBytes,
	}
	if asg.Attempts == 0 {
		asg.Attempts = decl.Attempts
	}
	if asg.CreatedAt.IsZero() {
		asg.CreatedAt = time.Now().UTC()
	}
	if asg.Attempt > asg.Attempts {
		return nil, fmt.Errorf("workertest: attempt %d of %d", asg.Attempt, asg.Attempts)
	}
	out, err := workerhook.Run(ctx, w, asg)
	if err != nil {
		return nil, err
	}
	r := &Result{Output: out.Output, Err: out.Err}
	if out.Progress != nil {
		r.Progress = &api.Progress{Done: out.Progress.Done, Total: out.Progress.Total, Unit: out.Progress.Unit}
	}
	switch {
	case out.NoVerdict != "":
		r.Outcome = Lost
	case out.Fail == nil:
		r.Outcome = Succeeded
	default:
		f, err := verdict.Failure(out.Fail, decl.Name, time.Duration(decl.TimeoutSeconds)*time.Second, decl.MaxResultBytes)
		if err != nil {
			return r, err
		}
		r.Error = f
		r.Outcome = Failed
		if f.Retryable && asg.Attempt < asg.Attempts {
			r.Outcome = Retry
		} else if f.Retryable {
			f.Message = fmt.Sprintf("%s (attempt %d of %d)", f.Message, asg.Attempt, asg.Attempts)
		}
	}
	return r, nil
}

// admit validates params against the declared schema with its defaults
// applied, as the gateway admits a submission.
func admit(decl wire.Declaration, params any) (json.RawMessage, error) {
	s, err := schema.Compile(decl.Schema)
	if err != nil {
		return nil, fmt.Errorf("workertest: type %q: schema: %w", decl.Name, err)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("workertest: params: %w", err)
	}
	doc, err := canon.DecodeStrict(raw)
	if err != nil {
		return nil, &api.ValidationError{Errors: []api.FieldError{{Field: "/params", Message: err.Error()}}}
	}
	applied, problems := s.Apply(doc)
	if problems != nil {
		return nil, problems
	}
	return json.Marshal(applied)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
