package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
)

// ErrResultTooLarge is returned by a job's Output once the result would
// exceed the type's MaxResultBytes; the job fails budget_exceeded.
var ErrResultTooLarge = errors.New("result exceeds the type's size limit")

// ErrResultRefused is returned by a job's Output once jobgate refused the
// result because it does not fit its tenant's result quota or the
// deployment's result storage. Jobgate has failed the job itself
// (budget_exceeded): whatever the handler returns then, the worker reports
// nothing more of the attempt.
var ErrResultRefused = errors.New("result refused by jobgate: no room for it (the job failed budget_exceeded)")

// Failure categories a handler may choose with Fail. CategoryHandlerError
// and CategoryRenderError are one choice: the handler's own failure,
// which jobgate records as handler_error for a user's type and as
// render_error for its built-in renderer's (docs/protocol.md, "Failure
// kinds and categories").
const (
	CategoryHandlerError   = api.CategoryHandlerError
	CategoryRenderError    = api.CategoryRenderError
	CategoryBudgetExceeded = api.CategoryBudgetExceeded
	CategoryInternal       = api.CategoryInternal
)

// failure is why an attempt failed, as reported to jobgate: its kind,
// whether another attempt may succeed, a message for the job's owner (only
// where the handler wrote one for them) and the cause, for the operator.
type failure struct {
	kind      string
	retryable bool
	user      string
	err       error
	// retryAfter: no next attempt sooner (FailRequest.RetryAfterMS).
	retryAfter time.Duration
}

func (f *failure) Error() string {
	if f.user != "" {
		return f.kind + ": " + f.user
	}
	if f.err != nil {
		return f.kind + ": " + f.err.Error()
	}
	return f.kind
}
func (f *failure) Unwrap() error { return f.err }

func (f *failure) request(h wire.Held) wire.FailRequest {
	msg := ""
	if f.err != nil {
		msg = f.err.Error()
	} else {
		msg = f.user
	}
	if len(msg) > 2048 {
		msg = msg[:2048]
	}
	user := printableOnly(f.user)
	if len(user) > 500 {
		user = user[:500] + "…"
	}
	return wire.FailRequest{Held: h, Kind: f.kind, Retryable: f.retryable, Message: msg, UserMessage: user,
		RetryAfterMS: f.retryAfter.Milliseconds()}
}

// Permanent marks err as final: the job fails now (handler_error) without
// further attempts, and err's message is shown to the job's owner: say
// what is wrong with the request, nothing internal. Any other error a
// handler returns is retried, and its text reaches only the operator (the
// logs); the owner reads a generic message of its category.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &failure{kind: wire.KindPermanent, user: err.Error(), err: err}
}

// Fail is a failure of a chosen category (handler_error, budget_exceeded
// or internal) that is retried or not as retryable says; its message is
// shown to the job's owner.
func Fail(category string, retryable bool, format string, args ...any) error {
	f := &failure{retryable: retryable, user: fmt.Sprintf(format, args...)}
	switch category {
	case api.CategoryBudgetExceeded:
		f.kind = wire.KindBudget
	case api.CategoryInternal:
		f.kind = wire.KindInternal
	default:
		f.kind = wire.KindPermanent
		if retryable {
			f.kind = wire.KindError
		}
	}
	return f
}

// Outcomes of an attempt that reached no verdict.
var (
	// errShutdown: the worker is stopping; the job goes back to the queue.
	errShutdown = errors.New("worker shutting down")
	// errLost: the job is no longer this attempt's (canceled, finished or
	// claimed by another worker after this one looked gone).
	errLost = errors.New("job no longer held by this attempt")
	// errLapsed: the attempt's lease ran out with no beat answered; its
	// handler was stopped, and the job is given back.
	errLapsed = errors.New("attempt's lease ran out")
)

func jsonUnmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("undecodable reply: %w", err)
	}
	return nil
}

// printableOnly replaces control characters (a newline in an error's text)
// with spaces: jobgate refuses a user message that is not printable.
func printableOnly(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
