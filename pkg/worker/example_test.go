package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/pkg/workertest"
	"github.com/jobgate/jobgate/pkg/workertest/jobgatetest"
)

// GreetingParams are a greeting's params; the type's JSON Schema is
// generated from them, bounds and the default included.
type GreetingParams struct {
	Name  string `json:"name" jsonschema:"minLength=1,maxLength=64"`
	Times int    `json:"times,omitempty" jsonschema:"minimum=1,maximum=100,default=3"`
}

// greeting is a job type: its name, limits and handler.
func greeting() worker.Type[GreetingParams] {
	return worker.Type[GreetingParams]{
		Name: "greeting", Description: "Greets someone, a line at a time",
		ContentType: "text/plain", Timeout: time.Minute,
		Work: func(ctx context.Context, j *worker.Job[GreetingParams]) error {
			if strings.EqualFold(j.Params.Name, "nobody") {
				// Not retried; the job's owner reads the message.
				return worker.Permanent(errors.New("nobody cannot be greeted"))
			}
			for i := range j.Params.Times {
				if _, err := fmt.Fprintf(j.Output(), "Hello, %s! (%d)\n", j.Params.Name, i+1); err != nil {
					return err // retried while attempts remain
				}
				j.Progress(i+1, j.Params.Times, "lines")
			}
			return nil
		},
	}
}

// A worker process declares its types and runs their handlers against a
// deployment's NATS, with the credentials `jobgate nats-user --worker
// --type greeting` prints. Here the deployment is a whole jobgate in this
// process (pkg/workertest/jobgatetest) and a client submits one job; a
// worker program's main reads the credentials from its environment and
// calls w.Run(ctx) instead of Start and Stop.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jg, err := jobgatetest.NewDeployment(ctx)
	if err != nil {
		panic(err)
	}
	defer jg.Stop(context.Background())
	creds, err := jg.WorkerCredentials("greeting")
	if err != nil {
		panic(err)
	}

	w, err := worker.New(worker.Config{URL: creds.URL, User: creds.User, Password: creds.Password})
	if err != nil {
		panic(err)
	}
	if err := worker.Register(w, greeting()); err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil { // returns once jobgate stored the declaration
		panic(err)
	}
	defer func() { _ = w.Stop(context.Background()) }() // drains running jobs
	if err := jg.WaitForType(ctx, "greeting"); err != nil {
		panic(err)
	}

	token, err := jg.Token("4", "reviewer-47")
	if err != nil {
		panic(err)
	}
	c, err := client.New(jg.URL(), token, client.WithoutJournal())
	if err != nil {
		panic(err)
	}
	sub, err := c.Submit(ctx, "greeting", GreetingParams{Name: "Grace", Times: 2})
	if err != nil {
		panic(err)
	}
	done, err := c.Wait(ctx, sub.Job.ID, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(done.State, done.Progress.Done, done.Progress.Unit)
	if _, err := c.Download(ctx, done.ID, os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// succeeded 2 lines
	// Hello, Grace! (1)
	// Hello, Grace! (2)
}

// Permanent fails the job at once, with the message its owner reads; a
// plain error is retried. pkg/workertest runs one attempt in process, as
// jobgate would judge it.
func ExamplePermanent() {
	ctx := context.Background()
	res, err := workertest.Run(ctx, greeting(), GreetingParams{Name: "nobody"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Error.Category, res.Error.Retryable)
	fmt.Println(res.Error.Message)
	// Output:
	// failed handler_error false
	// nobody cannot be greeted
}

// Fail chooses the failure's category and whether it is retried. A
// retryable failure is a retry while attempts remain; on the last attempt
// it fails the job, and its message says how many were made.
func ExampleFail() {
	quota := worker.Type[GreetingParams]{Name: "greeting", Attempts: 2,
		Work: func(ctx context.Context, j *worker.Job[GreetingParams]) error {
			return worker.Fail(worker.CategoryBudgetExceeded, true, "over %d greetings today", 1000)
		}}
	ctx := context.Background()
	for n := 1; n <= 2; n++ {
		res, err := workertest.RunAttempt(ctx, quota, GreetingParams{Name: "Ada"}, workertest.Attempt{Number: n})
		if err != nil {
			panic(err)
		}
		fmt.Printf("attempt %d: %s, %s: %s\n", n, res.Outcome, res.Error.Category, res.Error.Message)
	}
	// Output:
	// attempt 1: retry, budget_exceeded: over 1000 greetings today
	// attempt 2: failed, budget_exceeded: over 1000 greetings today (attempt 2 of 2)
}
