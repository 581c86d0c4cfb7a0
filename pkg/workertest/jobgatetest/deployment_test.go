package jobgatetest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/pkg/workertest"
	"github.com/jobgate/jobgate/pkg/workertest/jobgatetest"
	"github.com/stretchr/testify/require"
)

type rows struct {
	Rows int `json:"rows" jsonschema:"minimum=0,maximum=1000"`
}

// typeOf is a type whose handler is work.
func typeOf(name string, work func(ctx context.Context, j *worker.Job[rows]) error) worker.Type[rows] {
	return worker.Type[rows]{Name: name, ContentType: "text/csv", Timeout: time.Second, Work: work}
}

// The integration helper: a real type runs end to end through jobgate in
// this process, its worker connected over TCP with credentials for its own
// type, which reach no other.
func TestTypeRunsEndToEnd(t *testing.T) {
	t.Parallel()
	d := jobgatetest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	typ := typeOf("export", func(_ context.Context, j *worker.Job[rows]) error {
		for i := range j.Params.Rows {
			fmt.Fprintf(j.Output(), "row %d of %s\n", i+1, j.Tenant)
			j.Progress(i+1, j.Params.Rows, "rows")
		}
		return nil
	})
	creds, err := d.WorkerCredentials("export")
	require.NoError(t, err)
	require.Equal(t, d.NATSURL(), creds.URL)
	require.Equal(t, "jgw.export", creds.User)

	// The credential is for export only: declaring another type fails.
	other, err := worker.New(worker.Config{URL: creds.URL, User: creds.User, Password: creds.Password, ConnectTimeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, worker.Register(other, typeOf("import", typ.Work)))
	octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
	require.Error(t, other.Start(octx), "a credential for export cannot declare import")
	ocancel()
	require.NoError(t, other.Stop(context.Background()))

	w, err := worker.New(creds.Config())
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, typ))
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	require.NoError(t, d.WaitForType(ctx, "export"))

	tok, err := d.Token("4", "reviewer-47")
	require.NoError(t, err)
	c, err := client.New(d.URL(), tok, client.WithoutJournal())
	require.NoError(t, err)
	_, err = c.Submit(ctx, "import", rows{Rows: 1})
	require.ErrorIs(t, err, api.ErrValidation, "import was never declared")
	sub, err := c.Submit(ctx, "export", rows{Rows: 3})
	require.NoError(t, err)
	done, err := c.Wait(ctx, sub.Job.ID, nil)
	require.NoError(t, err)
	require.Equal(t, api.StateSucceeded, done.State, "%+v", done.Error)
	require.Equal(t, &api.Progress{Done: 3, Total: 3, Unit: "rows"}, done.Progress)
	require.Equal(t, "text/csv", done.Result.ContentType)
	var out strings.Builder
	_, err = c.Download(ctx, done.ID, &out)
	require.NoError(t, err)
	require.Equal(t, "row 1 of 4\nrow 2 of 4\nrow 3 of 4\n", out.String())

	// The unit run of the same type answers the same.
	res, err := workertest.RunAttempt(ctx, typ, rows{Rows: 3}, workertest.Attempt{Tenant: "4"})
	require.NoError(t, err)
	require.Equal(t, out.String(), string(res.Output))
	require.Equal(t, done.Progress, res.Progress)
}

// Run's verdicts are those a running jobgate records: each failing
// handler's job ends with the error Run predicts.
func TestVerdictsMatchJobgate(t *testing.T) {
	t.Parallel()
	d := jobgatetest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	types := map[string]func(context.Context, *worker.Job[rows]) error{
		"plain":     func(context.Context, *worker.Job[rows]) error { return errors.New("internal detail") },
		"permanent": func(context.Context, *worker.Job[rows]) error { return worker.Permanent(errors.New("no such region")) },
		"panics":    func(context.Context, *worker.Job[rows]) error { panic("boom") },
		"budget": func(context.Context, *worker.Job[rows]) error {
			return worker.Fail(worker.CategoryBudgetExceeded, false, "over %d rows", 10)
		},
		"internal": func(context.Context, *worker.Job[rows]) error {
			return worker.Fail(worker.CategoryInternal, true, "")
		},
		"slow": func(ctx context.Context, _ *worker.Job[rows]) error { <-ctx.Done(); return ctx.Err() },
		"big": func(_ context.Context, j *worker.Job[rows]) error {
			_, err := j.Output().Write(make([]byte, 11))
			return err
		},
	}
	var names []string
	for name := range types {
		names = append(names, name)
	}
	creds, err := d.WorkerCredentials(names...)
	require.NoError(t, err)
	w, err := worker.New(creds.Config())
	require.NoError(t, err)
	declared := map[string]worker.Type[rows]{}
	for name, work := range types {
		typ := typeOf(name, work)
		typ.Attempts, typ.MaxResultBytes = 1, 10 // the verdict at once, no backoff
		declared[name] = typ
		require.NoError(t, worker.Register(w, typ))
	}
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	tok, err := d.Token("4", "reviewer-47")
	require.NoError(t, err)
	c, err := client.New(d.URL(), tok, client.WithoutJournal())
	require.NoError(t, err)
	for _, name := range names {
		require.NoError(t, d.WaitForType(ctx, name))
		sub, err := c.Submit(ctx, name, rows{})
		require.NoError(t, err)
		done, err := c.Wait(ctx, sub.Job.ID, nil)
		require.NoError(t, err)
		require.Equal(t, api.StateFailed, done.State, name)
		res, err := workertest.Run(ctx, declared[name], rows{})
		require.NoError(t, err)
		require.Equal(t, workertest.Failed, res.Outcome, name)
		require.Equal(t, done.Error, res.Error, name)
	}
}
