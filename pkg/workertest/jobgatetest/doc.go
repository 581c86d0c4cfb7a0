// Package jobgatetest runs a whole jobgate in a test's process, for
// end-to-end tests of workers, clients, webhook receivers and endpoint
// handlers: an embedded NATS server with JetStream in a temp data dir, the
// dispatcher (whose broker checks every worker request), the renderer, the
// notifier and the gateway, as `jobgate serve --nats-listen` runs them,
// with serve's defaults.
//
// It links all of jobgate (the NATS server, the HTTP stack, the stores),
// which is why it is apart from its parent package: a handler's unit test
// with github.com/jobgate/jobgate/pkg/workertest links none of it.
//
// Start (or NewDeployment, e.g. in a TestMain) gives the gateway's URL,
// bearer tokens for any tenant and requester, and worker credentials
// limited to the given types, as `jobgate nats-user --worker --type T`
// prints them. The worker connects over TCP with them like a production
// worker process:
//
//	d := jobgatetest.Start(t)
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
// StartWith's Options add tenants' webhooks (loopback allowed, retried in
// moments) and let endpoint types' URLs name loopback addresses. The
// package's example runs the above whole.
package jobgatetest
