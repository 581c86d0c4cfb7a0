package e2e

import (
	"testing"

	"github.com/jobgate/jobgate/internal/auth"
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
