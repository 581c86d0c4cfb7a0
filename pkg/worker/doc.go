// Package worker is how a program runs jobgate job types: it declares its
// types (a name, a JSON Schema of the params, generated from the params
// struct or written by hand, and the limits: attempt timeout, attempts,
// result size, content type) and a handler for each, and runs any number of
// copies of itself against the deployment's NATS with a credential for
// those types only (`jobgate nats-user --worker --type T`). It speaks
// version 1 of the worker protocol (internal/wire, docs/protocol.md) as
// core NATS requests and touches no stream or bucket: each free handler
// slot asks jobgate's broker, run by the dispatcher, for its next job, and
// the broker picks it fairly between tenants and their requesters, claims
// it, and checks every beat, progress step, result upload and verdict
// against the claim's fencing token and the type's limits. A handler gets
// typed params, a context that ends on cancel, timeout, a lost claim or
// shutdown, Job.Progress and Job.Output (the result, streamed as it is
// written); returning nil succeeds, a plain error is retried with jittered
// backoff while attempts remain, and Permanent (or Fail) fails the job at
// once with a message its owner reads. Config.NewcomerSlots adds a slot per
// type for a tenant with nothing running in this process. Start's context
// bounds only the start-up (connecting, declaring): the workers then run
// until Stop. Stop(ctx) drains the running jobs, then gives the rest back
// without using up their attempts, within ctx's deadline (an error wrapping
// ctx.Err() says it ran out); it is safe to call twice or without Start,
// and a Stop during Start ends the start-up at once. Run does both around
// a context's end. The package links no NATS server; pkg/workertest tests
// handlers in process, pkg/workertest/jobgatetest against a whole jobgate.
//
//	w, _ := worker.New(worker.Config{URL: os.Getenv("JOBGATE_NATS_URL"),
//		User: os.Getenv("JOBGATE_WORKER_USER"), Password: os.Getenv("JOBGATE_WORKER_PASSWORD")})
//	worker.Register(w, worker.Type[Params]{Name: "export_sales", Schema: schema,
//		Work: func(ctx context.Context, j *worker.Job[Params]) error {
//			j.Progress(0, 100, "rows")
//			_, err := io.WriteString(j.Output(), "...")
//			return err
//		}})
//	w.Run(ctx)
package worker
