// Package verdict is jobgate's rule for what a worker's failure report
// becomes: the job's error category, whether it is retried, and the message
// the job's owner reads (a generic one of the category unless the worker
// wrote one for users). The broker records it; pkg/workertest shows it to
// a handler's unit test, so both read it from here.
package verdict

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
)

// MaxUserMessage bounds the message for users that is kept.
const MaxUserMessage = 500

// ErrNotPrintable: a message for users holds control characters.
var ErrNotPrintable = errors.New("the message for users must be printable (no newlines or other control characters)")

// retry says whether a kind's failure may be retried.
type retry int

const (
	retryAlways     retry = iota // another attempt may succeed, whatever the worker says
	retryNever                   // another attempt cannot help
	retryReported                // as the worker's report says (FailRequest.Retryable)
	retryUnlessUser              // as reported, and always when the worker wrote no message for users
)

// rule is one row of the table: what a failure of a kind becomes.
type rule struct {
	category string
	retry    retry
	// userMessage: the worker's message for users is shown; else generic
	// is, always.
	userMessage bool
	// generic is the owner's message when the worker wrote none;
	// {timeout} stands for the attempt's time budget, {max_result} for
	// the type's result limit in bytes.
	generic string
}

// handlerError marks the rows whose category is the handler's own:
// handler_error for a user's type, render_error for jobgate's built-in
// renderer (wire.Builtin), whose handler renders PDFs.
const handlerError = "handler"

// kinds is the one table from the worker protocol's failure kinds
// (wire.Kind*) to the job's error. docs/protocol.md, "Failure kinds and
// categories", shows it; keep the two alike.
var kinds = map[string]rule{
	wire.KindError:     {handlerError, retryAlways, true, "the job's worker reported an error"},
	wire.KindPermanent: {handlerError, retryNever, true, "the job's worker could not do it"},
	wire.KindPanic:     {handlerError, retryNever, false, "the job's worker failed"},
	wire.KindTimeout:   {api.CategoryTimeout, retryAlways, false, "the attempt did not finish within its time budget of {timeout}"},
	wire.KindTooLarge:  {api.CategoryBudgetExceeded, retryNever, false, "the result would be larger than the limit of {max_result} bytes"},
	wire.KindBudget:    {api.CategoryBudgetExceeded, retryReported, true, "the job exceeds a limit of its worker"},
	wire.KindInternal:  {api.CategoryInternal, retryUnlessUser, true, "the result could not be stored; the job is retried"},
	// jobgate's endpoint caller (docs/endpoints.md): the message for users
	// of a refusal is the handler's problem detail.
	wire.KindEndpointRejected: {api.CategoryEndpointRejected, retryNever, true, "the job's endpoint refused it"},
	wire.KindEndpointError:    {api.CategoryEndpointError, retryAlways, false, "the job's endpoint could not be reached or answered with an error"},
}

func (r rule) categoryFor(typ string) string {
	if r.category != handlerError {
		return r.category
	}
	if wire.Builtin(typ) {
		return api.CategoryRenderError
	}
	return api.CategoryHandlerError
}

// Failure is the job's error for a worker's report of an attempt of a job
// of type typ whose time budget was timeout, of a type whose results may
// be maxResult bytes.
func Failure(req *wire.FailRequest, typ string, timeout time.Duration, maxResult int64) (*api.Failure, error) {
	r, ok := kinds[req.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown failure kind %q", req.Kind)
	}
	user := req.UserMessage
	if len(user) > MaxUserMessage {
		user = user[:MaxUserMessage]
	}
	for _, c := range user {
		if c < 0x20 || c == 0x7f {
			return nil, ErrNotPrintable
		}
	}
	f := &api.Failure{Category: r.categoryFor(typ), Message: r.generic}
	if strings.Contains(f.Message, "{") {
		f.Message = strings.NewReplacer("{timeout}", timeout.String(), "{max_result}", strconv.FormatInt(maxResult, 10)).Replace(f.Message)
	}
	if r.userMessage && user != "" {
		f.Message = user
	}
	switch r.retry {
	case retryAlways:
		f.Retryable = true
	case retryReported:
		f.Retryable = req.Retryable
	case retryUnlessUser:
		f.Retryable = req.Retryable || user == ""
	}
	return f, nil
}
