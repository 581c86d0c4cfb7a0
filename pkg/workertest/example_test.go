package workertest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/pkg/workertest"
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
			if strings.EqualFold(j.Params.Name, "nobody") {
				return worker.Permanent(errors.New("nobody cannot be greeted"))
			}
			for i := range j.Params.Times {
				if _, err := fmt.Fprintf(j.Output(), "Hello, %s! (%d)\n", j.Params.Name, i+1); err != nil {
					return err
				}
				j.Progress(i+1, j.Params.Times, "lines")
			}
			return nil
		}}
}

// A handler's unit test: one attempt, in process, no NATS.
func ExampleRun() {
	ctx := context.Background()
	res, err := workertest.Run(ctx, greeting(), map[string]any{"name": "Ada"}) // times defaults to 3
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, *res.Progress)
	fmt.Print(string(res.Output))

	res, _ = workertest.Run(ctx, greeting(), Params{Name: "nobody"})
	fmt.Printf("%s: %s (%s)\n", res.Outcome, res.Error.Message, res.Error.Category)

	_, err = workertest.Run(ctx, greeting(), Params{Name: "Ada", Times: 1000})
	fmt.Println(err)
	// Output:
	// succeeded {3 3 lines}
	// Hello, Ada! (1)
	// Hello, Ada! (2)
	// Hello, Ada! (3)
	// failed: nobody cannot be greeted (handler_error)
	// validation failed: /params/times: must be at most 100
}
