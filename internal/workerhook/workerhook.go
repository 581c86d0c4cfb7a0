// Package workerhook lets pkg/workertest run one attempt of a type
// registered with pkg/worker in process, without NATS and without widening
// pkg/worker's API: pkg/worker sets the functions when it is linked, and
// only this module's packages can import this one.
package workerhook

import (
	"context"

	"github.com/jobgate/jobgate/internal/wire"
)

// Outcome is how one attempt ended, as the worker would report it.
type Outcome struct {
	// Output is what the handler wrote to the job's output (nil: nothing).
	Output []byte
	// Progress is the last progress the handler reported (nil: none).
	Progress *wire.Progress
	// Fail is the failure the worker would report; nil when the handler
	// succeeded or the attempt reached no verdict.
	Fail *wire.FailRequest
	// NoVerdict, when set, says why the attempt reached none: "lost"
	// (ctx ended before the handler returned, as when the job's owner
	// cancels it) or "given_back".
	NoVerdict string
	// Err is what the handler returned (nil on success).
	Err error
}

// Declarations returns the declarations of the types registered on w (a
// *worker.Workers), as the worker would declare them.
var Declarations func(w any) []wire.Declaration

// Run runs one attempt of asg with the handler of the type asg.Type
// registered on w (a *worker.Workers): within the assignment's time
// budget, its output kept in memory up to its MaxResultBytes, its verdict
// classified as the worker classifies it. It never touches the network.
var Run func(ctx context.Context, w any, asg *wire.Assignment) (Outcome, error)
