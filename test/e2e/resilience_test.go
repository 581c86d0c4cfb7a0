package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/renderer"
	"github.com/stretchr/testify/require"
)

// signInWithToken pastes a token into the sign-in form, as a reviewer with
// a token from `jobgate token` does.
func signInWithToken(t *testing.T, p *page, base, tok string) {
	t.Helper()
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token-form")),
		chromedp.SetValue(chromedp.ID("token"), tok),
		chromedp.Click(chromedp.CSS("#token-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("request-form")),
	))
}

// requestReport fills in the form and sends it with submit: a click on
// the button, or the Enter key.
func requestReport(t *testing.T, p *page, caseID, revision, pages string, submit chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.SendKeys(chromedp.ID("case"), caseID),
		chromedp.SendKeys(chromedp.ID("revision"), revision),
		chromedp.Clear(chromedp.ID("pages")), chromedp.SendKeys(chromedp.ID("pages"), pages),
		submit,
	))
}

var (
	clickRequest = chromedp.Click(chromedp.ID("request"))
	pressEnter   = chromedp.SendKeys(chromedp.ID("pages"), "\n") // keyboard only: Enter in a field submits
)

// intercept pauses the tab's requests that match the patterns and hands
// each to handle, which must continue, fulfil or fail it. It plays the
// unreliable network between the page and the server.
func intercept(t *testing.T, p *page, handle func(ctx context.Context, ev fetch.EventRequestPaused) error, patterns ...*fetch.RequestPattern) {
	t.Helper()
	events := chromedp.Events(p.ctx, fetch.RequestPaused)
	_, err := chromedp.Call(p.ctx, fetch.Enable, fetch.EnableParams{Patterns: patterns})
	require.NoError(t, err)
	var mu sync.Mutex
	var failures []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range events {
			if err != nil {
				return
			}
			if err := handle(p.ctx, ev); err != nil && p.ctx.Err() == nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		require.Empty(t, failures, "interception failed")
	})
}

func responseStage(ev fetch.EventRequestPaused) bool {
	return ev.ResponseStatusCode != 0 || ev.ResponseErrorReason != ""
}

// pass lets a paused request or response go on unchanged.
func pass(ctx context.Context, ev fetch.EventRequestPaused) error {
	if responseStage(ev) {
		_, err := chromedp.Call(ctx, fetch.ContinueResponse, fetch.ContinueResponseParams{RequestID: ev.RequestID})
		return err
	}
	_, err := chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
	return err
}

// TestPageRetriesWithOneKey: the server is busy (503, Retry-After), the
// reviewer reloads while the page waits, and the next answer is lost on
// the way back after the server admitted the job. The page keeps the
// request in localStorage and sends it with the same idempotency key each
// time; the server holds one job and the page shows it.
func TestPageRetriesWithOneKey(t *testing.T) {
	sys := startSystem(t, false)
	p := openBrowser(t)
	net := recordNetwork(t, p, sys.url)
	signInWithToken(t, p, sys.url, sys.token(t, "4", "reviewer-9"))

	var mu sync.Mutex
	posts := 0
	dropResponse := map[fetch.RequestID]bool{}
	intercept(t, p, func(ctx context.Context, ev fetch.EventRequestPaused) error {
		if ev.Request.Method != "POST" {
			return pass(ctx, ev)
		}
		mu.Lock()
		if responseStage(ev) {
			drop := dropResponse[ev.RequestID]
			mu.Unlock()
			if drop { // the server admitted it; the answer never arrives
				_, err := chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonConnectionReset})
				return err
			}
			return pass(ctx, ev)
		}
		posts++
		n := posts
		if n == 2 {
			dropResponse[ev.RequestID] = true
		}
		mu.Unlock()
		if n == 1 { // busy: come back in 30 s
			_, err := chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
				RequestID: ev.RequestID, ResponseCode: 503,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/problem+json"}, {Name: "Retry-After", Value: "30"}},
				Body:            []byte(`{"type":"/problems/unavailable","title":"Job store unavailable; retry with the same key","status":503}`),
			})
			return err
		}
		return pass(ctx, ev)
	},
		&fetch.RequestPattern{URLPattern: "*/v1/jobs", RequestStage: fetch.RequestStageRequest},
		&fetch.RequestPattern{URLPattern: "*/v1/jobs", RequestStage: fetch.RequestStageResponse},
	)

	requestReport(t, p, "12", "3", "3", clickRequest)
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](
		`document.getElementById('request-status').textContent.includes('trying again in 30 s')`,
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the page did not say it waits for Retry-After")
	first := net.matching(submits)
	require.Len(t, first, 1, "the page must wait for Retry-After, not retry at once")
	key := first[0].header("Idempotency-Key")
	require.NotEmpty(t, key)
	require.True(t, evalJS[bool](t, p, `document.getElementById('request').disabled`), "no second request while one is pending")
	pending := evalJS[string](t, p, `localStorage.getItem('jobgate.pending.4/reviewer-9') || ''`)
	require.Contains(t, pending, key, "the pending request and its key are stored before they are answered")

	// Reload while it waits: the page sends the stored request again, with
	// its key, at once.
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Reload()))
	_, err = chromedp.Run(p.ctx, chromedp.Poll[bool](
		`document.getElementById('request-status').textContent.startsWith('The server already had this request')`,
		chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the lost answer was not recovered by a retry with the same key")

	held := sys.listJobs(t, sys.token(t, "4", "reviewer-9"))
	require.Len(t, held, 1, "one click, one job")
	viewShows(t, p, held[0].ID, job.StateSucceeded)

	all := net.matching(submits)
	require.Len(t, all, 3, "busy, lost answer, replayed answer")
	for _, r := range all {
		require.Equal(t, key, r.header("Idempotency-Key"), "every retry carries the key of the click")
	}
	require.Equal(t, "", evalJS[string](t, p, `localStorage.getItem('jobgate.pending.4/reviewer-9') || ''`))
	require.False(t, evalJS[bool](t, p, `document.getElementById('request').disabled`))
}

// TestPageFallsBackToPolling: when the event stream cannot be opened (a
// proxy that refuses it, say), the page polls the job with If-None-Match,
// at the pace the server's Retry-After sets, and still reaches the end.
func TestPageFallsBackToPolling(t *testing.T) {
	sys := startSystem(t, true)
	p := openBrowser(t)
	net := recordNetwork(t, p, sys.url)
	signInWithToken(t, p, sys.url, sys.token(t, "7", "reviewer-3"))
	intercept(t, p, func(ctx context.Context, ev fetch.EventRequestPaused) error {
		_, err := chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonConnectionRefused})
		return err
	}, &fetch.RequestPattern{URLPattern: "*/events", RequestStage: fetch.RequestStageRequest})

	requestReport(t, p, "5", "1", "5", pressEnter)
	var jobID string
	select {
	case jobID = <-sys.gate.started:
	case <-time.After(60 * time.Second):
		t.Fatal("no render started")
	}
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](
		`document.getElementById('job-live').textContent.startsWith('Checking for changes')`,
		chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the page did not fall back to polling")
	viewShows(t, p, jobID, job.StateRunning)
	sys.gate.open()
	viewShows(t, p, jobID, job.StateSucceeded)

	streams := net.matching(eventStreams(jobID))
	require.Len(t, streams, 3, "three failed streams, then polling")
	polls := net.matching(func(r sentRequest) bool { return r.method == "GET" && r.path == "/v1/jobs/"+jobID })
	require.GreaterOrEqual(t, len(polls), 2)
	conditional := 0
	for _, r := range polls {
		if strings.HasPrefix(r.header("If-None-Match"), `"`) {
			conditional++
		}
	}
	require.Positive(t, conditional, "polls after the first ask If-None-Match")
	t.Logf("event stream attempts: %d, polls: %d (%d conditional)", len(streams), len(polls), conditional)
}

// TestPageShowsFailure: a job that fails shows its error category, is
// announced, and offers no download.
func TestPageShowsFailure(t *testing.T) {
	sys := startSystem(t, false, func(c *renderer.Config) { c.MaxPages = 3 }) // a 5-page report is over budget
	p := openBrowser(t)
	signInWithToken(t, p, sys.url, sys.token(t, "4", "reviewer-5"))
	requestReport(t, p, "8", "2", "5", pressEnter)
	held := []job.Resource{}
	require.Eventually(t, func() bool {
		held = sys.listJobs(t, sys.token(t, "4", "reviewer-5"))
		return len(held) == 1 && held[0].State == job.StateFailed
	}, 30*time.Second, 50*time.Millisecond)
	viewShows(t, p, held[0].ID, job.StateFailed)
	require.Equal(t, string(held[0].Error.Category), evalJS[string](t, p, `document.getElementById('job-error-category').textContent`))
	require.Equal(t, "budget_exceeded", evalJS[string](t, p, `document.getElementById('job-error-category').textContent`))
	require.False(t, evalJS[bool](t, p, `document.getElementById('job-error').hidden`))
	require.True(t, evalJS[bool](t, p, `document.getElementById('download').disabled`))
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](`document.getElementById('announce').textContent.startsWith('Report failed (budget_exceeded)')`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the failure was not announced")
}
