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
// Start (or NewDeployment, e.g. in a TestMain) runs a whole jobgate in the
// test's process for an end-to-end test: its gateway URL, bearer tokens
// for any tenant and requester, and worker credentials limited to the
// given types, as `jobgate nats-user --worker --type T` prints them. The
// worker connects over TCP with them like a production worker process:
//
//	d := workertest.Start(t)
//	creds, _ := d.WorkerCredentials("greeting")
//	w, _ := worker.New(creds.Config())
//	worker.Register(w, greetingType())
//	w.Start(ctx)
//	defer w.Stop(context.Background())
//	d.WaitForType(ctx, "greeting")
//	tok, _ := d.Token("4", "reviewer-47")
//	c, _ := client.New(d.URL(), tok, client.WithoutJournal())
//	sub, _ := c.Submit(ctx, "greeting", Params{Name: "Ada"})
//	done, _ := c.Wait(ctx, sub.Job.ID, nil)
//
// Both are shown whole, and run, in this package's examples.
package workertest
