package renderer

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobgate/jobgate/pkg/job"
)

// Outcomes of an attempt that did not produce a result, other than a failure.
var (
	// errShutdown: the renderer is stopping; the job goes back to the queue.
	errShutdown = errors.New("renderer shutting down")
	// errLost: the job is no longer this attempt's (canceled, finished or
	// claimed by another renderer after this one looked gone).
	errLost = errors.New("job no longer held by this attempt")
)

// failure is why an attempt failed: a category of the contract, a message
// for humans and whether another attempt may succeed.
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

func permanent(category, format string, args ...any) *failure {
	return &failure{category: category, message: fmt.Sprintf(format, args...)}
}

// classify turns what ended an attempt into a failure, or returns the error
// unchanged when it is not one (shutdown, lost job).
func (r *Renderer) classify(err error, attemptCtx, hardCtx context.Context) error {
	var f *failure
	switch {
	case errors.As(err, &f):
		return f
	case errors.Is(err, errLost), errors.Is(err, errShutdown):
		return err
	case hardCtx.Err() != nil:
		return fmt.Errorf("%w: %w", errShutdown, err)
	case errors.Is(err, context.DeadlineExceeded) && errors.Is(attemptCtx.Err(), context.DeadlineExceeded):
		return &failure{category: job.CategoryTimeout, retryable: true, err: err,
			message: fmt.Sprintf("rendering did not finish within its time budget of %s", r.cfg.RenderTimeout)}
	case errors.Is(err, errOutputTooLarge):
		return &failure{category: job.CategoryBudgetExceeded, err: err,
			message: fmt.Sprintf("the report would be larger than the output budget of %d bytes", r.cfg.MaxOutputBytes)}
	}
	return &failure{category: job.CategoryInternal, retryable: true, err: err,
		message: "the renderer hit a transient error; the job is retried"}
}
