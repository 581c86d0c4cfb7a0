package workertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/pkg/workertest"
	"github.com/stretchr/testify/require"
)

type rows struct {
	Rows int `json:"rows" jsonschema:"minimum=0,maximum=1000"`
}

// typeOf is a type whose handler is work.
func typeOf(name string, work func(ctx context.Context, j *worker.Job[rows]) error) worker.Type[rows] {
	return worker.Type[rows]{Name: name, ContentType: "text/csv", Timeout: time.Second, Work: work}
}

func TestSuccessKeepsOutputAndProgress(t *testing.T) {
	t.Parallel()
	var seen *worker.Job[rows]
	typ := typeOf("export", func(_ context.Context, j *worker.Job[rows]) error {
		seen = j
		j.Progress(0, j.Params.Rows, "rows")
		for i := range j.Params.Rows {
			if _, err := fmt.Fprintf(j.Output(), "%d\n", i); err != nil {
				return err
			}
			j.Progress(i+1, j.Params.Rows, "rows")
		}
		j.Logger().Info("written")
		return nil
	})
	created := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	res, err := workertest.RunAttempt(t.Context(), typ, rows{Rows: 3},
		workertest.Attempt{ID: "job_1", Tenant: "4", Requester: "reviewer-47", Number: 2, CreatedAt: created})
	require.NoError(t, err)
	require.Equal(t, workertest.Succeeded, res.Outcome)
	require.Equal(t, "0\n1\n2\n", string(res.Output))
	require.Equal(t, &api.Progress{Done: 3, Total: 3, Unit: "rows"}, res.Progress)
	require.Nil(t, res.Error)
	require.NoError(t, res.Err)
	require.Equal(t, "job_1", seen.ID)
	require.Equal(t, "export", seen.Type)
	require.Equal(t, "4", seen.Tenant)
	require.Equal(t, "reviewer-47", seen.Requester)
	require.Equal(t, 2, seen.Attempt)
	require.Equal(t, 3, seen.Attempts, "the type's default")
	require.Equal(t, created, seen.CreatedAt)

	res, err = workertest.Run(t.Context(), typ, json.RawMessage(`{"rows":0}`))
	require.NoError(t, err)
	require.Equal(t, workertest.Succeeded, res.Outcome)
	require.Nil(t, res.Output, "nothing written")
}

func TestPlainErrorIsARetry(t *testing.T) {
	t.Parallel()
	cause := errors.New("database connection reset")
	typ := typeOf("flaky", func(context.Context, *worker.Job[rows]) error { return cause })
	res, err := workertest.Run(t.Context(), typ, rows{})
	require.NoError(t, err)
	require.Equal(t, workertest.Retry, res.Outcome)
	require.ErrorIs(t, res.Err, cause, "the operator's cause")
	require.Equal(t, &api.Failure{Category: api.CategoryHandlerError, Retryable: true,
		Message: "the job's worker reported an error"}, res.Error, "the owner reads a generic message, not the cause")

	// On the last attempt the job fails.
	res, err = workertest.RunAttempt(t.Context(), typ, rows{}, workertest.Attempt{Number: 3})
	require.NoError(t, err)
	require.Equal(t, workertest.Failed, res.Outcome)
	require.Equal(t, "the job's worker reported an error (attempt 3 of 3)", res.Error.Message)
}

func TestPermanentIsPermanent(t *testing.T) {
	t.Parallel()
	typ := typeOf("picky", func(context.Context, *worker.Job[rows]) error {
		return worker.Permanent(errors.New("region North has no sales before 2020"))
	})
	res, err := workertest.Run(t.Context(), typ, rows{})
	require.NoError(t, err)
	require.Equal(t, workertest.Failed, res.Outcome)
	require.Equal(t, &api.Failure{Category: api.CategoryHandlerError, Message: "region North has no sales before 2020"}, res.Error)

	typ = typeOf("budget", func(context.Context, *worker.Job[rows]) error {
		return worker.Fail(worker.CategoryBudgetExceeded, true, "too many rows for now")
	})
	res, err = workertest.Run(t.Context(), typ, rows{})
	require.NoError(t, err)
	require.Equal(t, workertest.Retry, res.Outcome)
	require.Equal(t, &api.Failure{Category: api.CategoryBudgetExceeded, Retryable: true, Message: "too many rows for now"}, res.Error)
}

// What else ends an attempt ends it as jobgate ends it.
func TestPanicTimeoutSizeAndCancel(t *testing.T) {
	t.Parallel()
	res, err := workertest.Run(t.Context(), typeOf("panics", func(context.Context, *worker.Job[rows]) error { panic("boom") }), rows{})
	require.NoError(t, err)
	require.Equal(t, workertest.Failed, res.Outcome)
	require.Equal(t, "the job's worker failed", res.Error.Message)
	require.ErrorContains(t, res.Err, "boom")

	slow := typeOf("slow", func(ctx context.Context, _ *worker.Job[rows]) error {
		<-ctx.Done()
		return ctx.Err()
	})
	res, err = workertest.Run(t.Context(), slow, rows{})
	require.NoError(t, err)
	require.Equal(t, workertest.Retry, res.Outcome)
	require.Equal(t, &api.Failure{Category: api.CategoryTimeout, Retryable: true,
		Message: "the attempt did not finish within its time budget of 1s"}, res.Error)

	// A handler that outruns its budget and returns nil anyway has timed
	// out all the same.
	stubborn := typeOf("stubborn", func(ctx context.Context, _ *worker.Job[rows]) error {
		<-ctx.Done()
		return nil
	})
	res, err = workertest.Run(t.Context(), stubborn, rows{})
	require.NoError(t, err)
	require.Equal(t, workertest.Retry, res.Outcome)
	require.Equal(t, api.CategoryTimeout, res.Error.Category)

	ctx, cancel := context.WithCancel(t.Context())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	res, err = workertest.Run(ctx, slow, rows{})
	require.NoError(t, err)
	require.Equal(t, workertest.Lost, res.Outcome, "ctx ended first: as when the owner cancels")
	require.Nil(t, res.Error)

	big := typeOf("big", func(_ context.Context, j *worker.Job[rows]) error {
		_, err := j.Output().Write(make([]byte, 11))
		return err
	})
	big.MaxResultBytes = 10
	res, err = workertest.Run(t.Context(), big, rows{})
	require.NoError(t, err)
	require.Equal(t, workertest.Failed, res.Outcome)
	require.Equal(t, api.CategoryBudgetExceeded, res.Error.Category)
	require.ErrorIs(t, res.Err, worker.ErrResultTooLarge)
}

// What jobgate would refuse is an error, not a result.
func TestRefusals(t *testing.T) {
	t.Parallel()
	ok := typeOf("fine", func(context.Context, *worker.Job[rows]) error { return nil })
	_, err := workertest.Run(t.Context(), ok, map[string]any{"rows": 5000})
	var ve *api.ValidationError
	require.ErrorAs(t, err, &ve, "params the schema refuses are a 422")
	require.Equal(t, "/params/rows", ve.Errors[0].Field)
	_, err = workertest.Run(t.Context(), ok, map[string]any{"rows": 1, "extra": true})
	require.ErrorAs(t, err, &ve)

	_, err = workertest.Run(t.Context(), typeOf("Bad Name", ok.Work), rows{})
	require.Error(t, err, "a type Register refuses")

	multiline := typeOf("multiline", func(context.Context, *worker.Job[rows]) error {
		return worker.Permanent(errors.New("line one\nline two"))
	})
	res, err := workertest.Run(t.Context(), multiline, rows{})
	require.NoError(t, err)
	require.Equal(t, "line one line two", res.Error.Message, "a newline in a message for users reads as a space")
}
