package worker

import (
	"errors"
	"fmt"

	"github.com/jobgate/jobgate/pkg/job"
)

// ErrResultTooLarge is returned by a job's Output once the result would
// exceed the type's MaxResultBytes; the job fails budget_exceeded.
var ErrResultTooLarge = errors.New("result exceeds the type's size limit")

// Failure categories a handler may choose with Fail.
const (
	CategoryRenderError    = job.CategoryRenderError
	CategoryBudgetExceeded = job.CategoryBudgetExceeded
	CategoryInternal       = job.CategoryInternal
)

// failure is why an attempt failed: a category of the contract, a message
// for the job's owner and whether another attempt may succeed.
type failure struct {
	category  string
	message   string
	retryable bool
	err       error
}

func (f *failure) Error() string { return f.category + ": " + f.message }
func (f *failure) Unwrap() error { return f.err }

func (f *failure) record() *job.Failure {
	return &job.Failure{Category: f.category, Message: f.message, Retryable: f.retryable}
}

// Permanent marks err as final: the job fails now (render_error) with err's
// message, without further attempts. The message is shown to the job's
// owner: say what is wrong with the request, nothing internal.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &failure{category: job.CategoryRenderError, message: err.Error(), err: err}
}

// Fail is a failure of a chosen category (render_error, budget_exceeded or
// internal) that is retried or not as retryable says.
func Fail(category string, retryable bool, format string, args ...any) error {
	switch category {
	case job.CategoryRenderError, job.CategoryBudgetExceeded, job.CategoryInternal:
	default:
		category = job.CategoryRenderError
	}
	return &failure{category: category, retryable: retryable, message: fmt.Sprintf(format, args...)}
}

// Outcomes of an attempt that reached no verdict.
var (
	// errShutdown: the worker is stopping; the job goes back to the queue.
	errShutdown = errors.New("worker shutting down")
	// errLost: the job is no longer this attempt's (canceled, finished or
	// claimed by another worker after this one looked gone).
	errLost = errors.New("job no longer held by this attempt")
)
