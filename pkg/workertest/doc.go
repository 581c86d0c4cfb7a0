// Package workertest tests job type handlers written with
// github.com/jobgate/jobgate/pkg/worker, in the handler's own module.
//
// Run runs one attempt of a type's handler in the test's process, without
// NATS or a server: the params are validated against the type's schema
// with its defaults applied (as the gateway admits them), the handler gets
// a *worker.Job[T] as it would from jobgate, and the Result is what
// jobgate would record: the output bytes, the last progress reported, and
// the outcome with the job's error as its owner would read it.
//
//	res, err := workertest.Run(ctx, greetingType(), Params{Name: "Ada", Times: 2})
//	// res.Outcome == workertest.Succeeded, string(res.Output) == "Hello, Ada! (1)\n...",
//	// res.Progress == &api.Progress{Done: 2, Total: 2, Unit: "lines"}
//
// A plain error is a Retry while attempts remain (RunAttempt with
// Attempt{Number: 3, Of: 3} runs the last one, where it is Failed);
// worker.Permanent(err) is Failed at once and err's message is what the
// owner reads; a panic, a timeout or a result over MaxResultBytes end as
// jobgate ends them. If ctx ends before the handler returns, the attempt
// is Lost, as when the job's owner cancels it.
//
// Run links no NATS server, HTTP stack or store: a handler's unit test
// builds and starts in moments. For an end-to-end test against a whole
// jobgate in the test's process, see the jobgatetest package beneath this
// one.
//
// Run is shown whole, and run, in this package's example.
package workertest
