package jobgatetest_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/pkg/workertest/jobgatetest"
)

// Params are a greeting's params (the schema is generated from them).
type Params struct {
	Name  string `json:"name" jsonschema:"minLength=1,maxLength=64"`
	Times int    `json:"times,omitempty" jsonschema:"minimum=1,maximum=100,default=3"`
}

// greeting is the type under test: as a worker program declares it.
func greeting() worker.Type[Params] {
	return worker.Type[Params]{Name: "greeting", ContentType: "text/plain", Timeout: time.Minute,
		Work: func(ctx context.Context, j *worker.Job[Params]) error {
			for i := range j.Params.Times {
				if _, err := fmt.Fprintf(j.Output(), "Hello, %s! (%d)\n", j.Params.Name, i+1); err != nil {
					return err
				}
				j.Progress(i+1, j.Params.Times, "lines")
			}
			return nil
		}}
}

// An end-to-end test: the worker runs against a whole jobgate in the
// test's process, with credentials for its type only, and a client submits
// a job over HTTP and reads its result.
func ExampleNewDeployment() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := jobgatetest.NewDeployment(ctx) // in a test: d := jobgatetest.Start(t)
	if err != nil {
		panic(err)
	}
	defer d.Stop(context.Background())

	creds, err := d.WorkerCredentials("greeting")
	if err != nil {
		panic(err)
	}
	w, err := worker.New(creds.Config())
	if err != nil {
		panic(err)
	}
	if err := worker.Register(w, greeting()); err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	defer func() { _ = w.Stop(context.Background()) }()
	if err := d.WaitForType(ctx, "greeting"); err != nil {
		panic(err)
	}

	tok, err := d.Token("4", "reviewer-47")
	if err != nil {
		panic(err)
	}
	c, err := client.New(d.URL(), tok, client.WithoutJournal())
	if err != nil {
		panic(err)
	}
	sub, err := c.Submit(ctx, "greeting", Params{Name: "Grace", Times: 2})
	if err != nil {
		panic(err)
	}
	done, err := c.Wait(ctx, sub.Job.ID, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(done.State, done.Result.ContentType)
	if _, err := c.Download(ctx, done.ID, os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// succeeded text/plain
	// Hello, Grace! (1)
	// Hello, Grace! (2)
}
