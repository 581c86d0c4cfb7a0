package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// submitJob is POST /v1/jobs as a script would send it.
func (s *system) submitJob(t *testing.T, tok, key, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/v1/jobs", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", data)
	var r job.Resource
	require.NoError(t, json.Unmarshal(data, &r))
	return r.ID
}

// TestMailDeepLinkOpensTheJob follows the link of a notice mail
// (`<base>/#job=<id>`): after sign-in the page shows that job, even when it
// is not the one it would pick by itself, and a link to a job the signed-in
// reviewer cannot see says so instead of showing another one silently.
func TestMailDeepLinkOpensTheJob(t *testing.T) {
	sys := startSystem(t, false)
	tok := sys.token(t, "4", "reviewer-47")
	older := sys.submitJob(t, tok, "deep-1", `{"type":"permit_report","params":{"case_id":47,"revision":1,"pages":1}}`)
	newer := sys.submitJob(t, tok, "deep-2", `{"type":"permit_report","params":{"case_id":47,"revision":2,"pages":1}}`)
	foreign := sys.submitJob(t, sys.token(t, "4", "reviewer-48"), "deep-3", `{"type":"permit_report","params":{"case_id":48,"revision":1,"pages":1}}`)
	require.Eventually(t, func() bool {
		done := 0
		for _, j := range sys.listJobs(t, tok) {
			if j.State.Terminal() {
				done++
			}
		}
		return done == 2
	}, 60*time.Second, 50*time.Millisecond)

	p := openBrowser(t)
	p.net = recordNetwork(t, p, sys.url)
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.Navigate(sys.url+"/#job="+older),
		chromedp.WaitVisible(chromedp.ID("token-form")),
		chromedp.SetValue(chromedp.ID("token"), tok),
		chromedp.Click(chromedp.CSS("#token-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("request-form")),
	))
	viewShows(t, p, older, job.StateSucceeded)
	require.NotEqual(t, older, newer)
	require.Empty(t, evalJS[string](t, p, `location.hash`), "the link is used once; a reload shows the remembered view")

	// A link to someone else's job: the page says so.
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Navigate(sys.url+"/#job="+foreign)))
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](
		`document.getElementById('jobs-error').textContent.includes('not visible to this sign-in')`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err)
	require.NotEqual(t, foreign, evalJS[string](t, p, `document.getElementById('view').dataset.jobId || ''`))
}
