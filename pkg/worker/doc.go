// Package worker is how jobgate runs a job type: a program declares its
// types (a name, a JSON Schema of the params, limits) and a handler for
// each, and runs any number of copies of itself against the deployment's
// NATS. Every gateway accepts a declared type within moments, validates
// params against its schema, and the type's jobs reach the handler here.
//
// The handler sees typed params, a context that ends on cancel, timeout or
// shutdown, a progress reporter and a streaming output; claims, heartbeats,
// acknowledgements, redelivery, retries with backoff and the sweeper's
// rules are this package's job. A handler's error is retried (with jittered
// backoff, up to the type's attempts) unless it is Permanent.
//
// A type's work is queued per requester; a free slot takes the tenants with
// work round-robin, then that tenant's requesters with work round-robin, so
// one tenant's backlog never holds up another's jobs, nor one requester's
// another requester's of the same tenant. Config.TenantWeights and
// Config.TenantMaxRunning tune the shares (a capped tenant's work is one
// queue, first in, first out, for all its requesters).
//
//	w, _ := worker.New(worker.Config{URL: "nats://127.0.0.1:4222", User: "worker", Password: pw})
//	worker.Register(w, worker.Type[Params]{Name: "export_sales", Schema: schema,
//		Work: func(ctx context.Context, j *worker.Job[Params]) error {
//			j.Progress(0, 100, "rows")
//			_, err := io.WriteString(j.Output(), "...")
//			return err
//		}})
//	w.Run(ctx)
package worker
