// Command greeting is a complete jobgate worker: it declares the job type
// "greeting" (its params schema generated from Params) and runs its jobs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/jobgate/jobgate/pkg/worker"
)

// Params are a greeting job's params; every string must be bounded.
type Params struct {
	Name  string `json:"name" jsonschema:"minLength=1,maxLength=64"`
	Times int    `json:"times,omitempty" jsonschema:"minimum=1,maximum=100,default=3"`
}

// greeting declares the type and its handler (greeting_test.go tests it).
func greeting() worker.Type[Params] {
	return worker.Type[Params]{Name: "greeting", ContentType: "text/plain", Timeout: time.Minute,
		Work: func(ctx context.Context, j *worker.Job[Params]) error {
			for i := range j.Params.Times {
				if _, err := fmt.Fprintf(j.Output(), "Hello, %s! (%d)\n", j.Params.Name, i+1); err != nil {
					return err // ctx ended, or the result grew past its limit
				}
				j.Progress(i+1, j.Params.Times, "lines")
			}
			return nil // succeeded: what was written is the result
		}}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// The credential: export $(jobgate nats-user --worker --type greeting --env)
	w, err := worker.New(worker.Config{URL: os.Getenv("JOBGATE_NATS_URL"), // empty: nats://127.0.0.1:4222
		User: os.Getenv("JOBGATE_WORKER_USER"), Password: os.Getenv("JOBGATE_WORKER_PASSWORD")})
	if err == nil {
		err = worker.Register(w, greeting())
	}
	if err == nil {
		err = w.Run(ctx) // until Ctrl-C; running jobs finish or go back to the queue
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
