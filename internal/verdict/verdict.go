// Package verdict is jobgate's rule for what a worker's failure report
// becomes: the job's error category, whether it is retried, and the message
// the job's owner reads (a generic one of the category unless the worker
// wrote one for users). The broker records it; pkg/workertest shows it to
// a handler's unit test, so both read it from here.
package verdict

import (
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
)

// MaxUserMessage bounds the message for users that is kept.
const MaxUserMessage = 500

// ErrNotPrintable: a message for users holds control characters.
var ErrNotPrintable = errors.New("the message for users must be printable (no newlines or other control characters)")

// Failure is the job's error for a worker's report of an attempt whose
// time budget was timeout, of a type whose results may be maxResult bytes.
func Failure(req *wire.FailRequest, timeout time.Duration, maxResult int64) (*api.Failure, error) {
	user := req.UserMessage
	if len(user) > MaxUserMessage {
		user = user[:MaxUserMessage]
	}
	for _, c := range user {
		if c < 0x20 || c == 0x7f {
			return nil, ErrNotPrintable
		}
	}
	pick := func(generic string) string {
		if user != "" {
			return user
		}
		return generic
	}
	switch req.Kind {
	case wire.KindError:
		return &api.Failure{Category: api.CategoryRenderError, Retryable: true, Message: pick("the job's worker reported an error")}, nil
	case wire.KindPermanent:
		return &api.Failure{Category: api.CategoryRenderError, Message: pick("the job's worker could not do it")}, nil
	case wire.KindPanic:
		return &api.Failure{Category: api.CategoryRenderError, Message: "the job's worker failed"}, nil
	case wire.KindTimeout:
		return &api.Failure{Category: api.CategoryTimeout, Retryable: true,
			Message: fmt.Sprintf("the attempt did not finish within its time budget of %s", timeout)}, nil
	case wire.KindTooLarge:
		return &api.Failure{Category: api.CategoryBudgetExceeded,
			Message: fmt.Sprintf("the result would be larger than the limit of %d bytes", maxResult)}, nil
	case wire.KindBudget:
		return &api.Failure{Category: api.CategoryBudgetExceeded, Retryable: req.Retryable, Message: pick("the job exceeds a limit of its worker")}, nil
	case wire.KindEndpointRejected:
		// jobgate's endpoint caller: a refusal's message for users is the
		// handler's problem detail.
		return &api.Failure{Category: api.CategoryEndpointRejected, Message: pick("the job's endpoint refused it")}, nil
	case wire.KindEndpointError:
		return &api.Failure{Category: api.CategoryEndpointError, Retryable: true,
			Message: "the job's endpoint could not be reached or answered with an error"}, nil
	case wire.KindInternal:
		return &api.Failure{Category: api.CategoryInternal, Retryable: req.Retryable || user == "",
			Message: pick("the result could not be stored; the job is retried")}, nil
	}
	return nil, fmt.Errorf("unknown failure kind %q", req.Kind)
}
