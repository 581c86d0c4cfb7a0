package workertest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/pkg/workertest"
)

// A plain error is a retry while attempts remain and fails the job on the
// last one; Attempt says which attempt runs. The handler sees the job as
// jobgate would hand it over.
func ExampleRunAttempt() {
	flaky := worker.Type[Params]{Name: "greeting", Attempts: 3,
		Work: func(ctx context.Context, j *worker.Job[Params]) error {
			return fmt.Errorf("attempt %d of %d for %s: the mail server timed out", j.Attempt, j.Attempts, j.Tenant)
		}}
	ctx := context.Background()
	for _, n := range []int{1, 3} {
		res, err := workertest.RunAttempt(ctx, flaky, Params{Name: "Ada"}, workertest.Attempt{Tenant: "4", Number: n})
		if err != nil {
			panic(err)
		}
		// res.Err is the handler's error, for the operator's log; res.Error
		// is what the job's owner reads: jobgate's generic message.
		fmt.Printf("%s: %v\n  owner reads: %s (%s, retryable %t)\n", res.Outcome, res.Err, res.Error.Message, res.Error.Category, res.Error.Retryable)
	}
	// Output:
	// retry: attempt 1 of 3 for 4: the mail server timed out
	//   owner reads: the job's worker reported an error (handler_error, retryable true)
	// failed: attempt 3 of 3 for 4: the mail server timed out
	//   owner reads: the job's worker reported an error (attempt 3 of 3) (handler_error, retryable true)
}

// An attempt whose context ends before its handler returns reaches no
// verdict (Lost), as when the job's owner cancels it; the handler's own
// time budget is the type's Timeout, which fails the attempt instead.
func ExampleRun_lost() {
	slow := worker.Type[Params]{Name: "greeting", Timeout: time.Minute,
		Work: func(ctx context.Context, j *worker.Job[Params]) error {
			<-ctx.Done()
			return ctx.Err()
		}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the owner canceled the job
	res, err := workertest.Run(ctx, slow, Params{Name: "Ada"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, errors.Is(res.Err, context.Canceled))
	// Output:
	// lost true
}
