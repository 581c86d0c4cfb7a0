package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/stretchr/testify/require"
)

// The console shows a scheduled job: counted in its type's Scheduled
// column, its run_at in the job's view, and Run now makes it due at once.
func TestConsoleRunsAScheduledJobNow(t *testing.T) {
	sys := startSystem(t, false)
	owner := sys.token(t, "4", "reviewer-47")
	id := sys.submitWhenDeclared(t, owner, "c-sched", `{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":1},"delay":"1h"}`)
	admin := sys.mintRole(t, auth.Identity{Tenant: "4", Requester: "lead-1", Admin: true})

	p := openBrowser(t)
	consoleSignIn(t, p, sys.url, admin)
	waitJS(t, p, `(document.querySelector('#stats-body tr[data-type=permit_report] [data-k=scheduled]') || {}).textContent === '1'`,
		"the Scheduled column counts it")
	evalJS[any](t, p, `location.hash = 'view=job&id=`+id+`'`)
	waitJS(t, p, `document.getElementById('view-job').dataset.state === 'scheduled'`, "the scheduled job")
	require.Contains(t, evalJS[string](t, p, `document.getElementById('d-waiting').textContent`), "Scheduled: no attempt starts before")
	require.False(t, evalJS[bool](t, p, `document.getElementById('d-run-now').hidden`), "Run now offered")
	evalJS[any](t, p, `document.getElementById('d-run-now').click()`)
	waitJS(t, p, `document.getElementById('view-job').dataset.state !== 'scheduled' && document.getElementById('d-run-now').hidden`,
		"run now: queued, and no Run now any more")
	require.Contains(t, evalJS[string](t, p, `document.getElementById('d-status').textContent`), "to run now")
}

// The console shows the jobs a type's flow control holds back: its
// "Waiting for a place" count links to them, listed under the Waiting for
// filter (which no bulk action takes), and a job's view says what it waits
// for.
func TestConsoleShowsJobsWaitingForAConcurrencyPlace(t *testing.T) {
	sys := startSystem(t, false)
	w, err := worker.New(worker.Config{Conn: sys.res.JS.Conn(), Name: "flow-worker-1", NewcomerSlots: -1, DrainTimeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[consoleParams]{Name: "one_export", ContentType: "text/plain", Schema: consoleSchema,
		Concurrency: 4, ConcurrencyKeys: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}},
		Work: func(ctx context.Context, _ *worker.Job[consoleParams]) error {
			<-ctx.Done() // until canceled (or the worker stops)
			return ctx.Err()
		}}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	owner := sys.token(t, "4", "reviewer-47")
	var ids []string
	for i := range 3 {
		ids = append(ids, sys.submitWhenDeclared(t, owner, fmt.Sprintf("c-one-%d", i), fmt.Sprintf(`{"type":"one_export","params":{"n":%d}}`, i)))
	}
	op := sys.mintRole(t, auth.Identity{Operator: true, Requester: "ops-1"})

	p := openBrowser(t)
	consoleSignIn(t, p, sys.url, op)
	count := `#stats-body tr[data-type=one_export] [data-k=waiting_concurrency]`
	waitJS(t, p, `(document.querySelector('`+count+` a') || {}).textContent === '2'`, "two jobs counted waiting for the tenant's place")
	require.Equal(t, "0", evalJS[string](t, p, `document.querySelector('#stats-body tr[data-type=one_export] [data-k=rate_limited]').textContent`))
	evalJS[any](t, p, `document.querySelector('`+count+` a').click()`)
	waitJS(t, p, `document.querySelectorAll('#jobs-body tr').length === 2`, "the two waiting jobs listed")
	listed := evalJS[[]string](t, p, jobRows)
	require.Subset(t, ids, listed)
	require.Equal(t, "concurrency", evalJS[string](t, p, `document.getElementById('f-waiting').value`))
	require.Equal(t, "one_export", evalJS[string](t, p, `document.getElementById('f-type').value`))
	require.True(t, evalJS[bool](t, p, `document.getElementById('bulk-cancel').disabled`), "no bulk action on what a job waits for")

	evalJS[any](t, p, `location.hash = 'view=job&id=`+listed[0]+`'`)
	waitJS(t, p, `document.getElementById('d-waiting').dataset.waitingFor === 'concurrency'`, "the job's view")
	require.Contains(t, evalJS[string](t, p, `document.getElementById('d-waiting').textContent`), "Waiting for a concurrency place")
}
