package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	cdpage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/stretchr/testify/require"
)

// The console's tests: the operator console at /admin in a real Chromium,
// against jobs submitted through the API and run by a real worker process
// (in-process, over the system's own NATS connection).

type consoleParams struct {
	N int `json:"n"`
}

var consoleSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"n":{"type":"integer"}}}`)

// hostileError is what the flaky type's worker fails with: a console that
// made markup of it would run it.
const hostileError = `render broke: <img src=x onerror="window.__xss=1"> <script>window.__xss=2</script> & "quotes"`

// mintRole mints a token with a role the way `jobgate token` does.
func (s *system) mintRole(t *testing.T, id auth.Identity) string {
	t.Helper()
	tok, err := auth.Mint(s.secret, id, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

// adminGet is a GET of the admin API (or /v1/types) as a script would send it.
func (s *system) adminGet(t *testing.T, tok, path string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", path, body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(body, &out))
	return out
}

// submitWhenDeclared submits a job of a user's type, again until the
// gateway has accepted the type its worker declared.
func (s *system) submitWhenDeclared(t *testing.T, tok, key, body string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/jobs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var r job.Resource
		_ = json.NewDecoder(resp.Body).Decode(&r)
		id = r.ID
		return resp.StatusCode == http.StatusAccepted
	}, 20*time.Second, 50*time.Millisecond)
	return id
}

// waitJS polls a boolean expression in the page until it holds (30 s).
func waitJS(t *testing.T, p *page, expr, what string) {
	t.Helper()
	waitJSWithin(t, p, 30*time.Second, expr, what)
}

// waitJSWithin is waitJS with its own deadline.
func waitJSWithin(t *testing.T, p *page, within time.Duration, expr, what string) {
	t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(within)))
	if err != nil {
		dump, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: %v\npage text:\n%s\nrequests:\n%s", what, err, dump, p.net.String())
	}
}

// jobRows is the ids the console's job list shows, in order.
const jobRows = `[...document.querySelectorAll('#jobs-body tr')].map(r => r.dataset.jobId)`

func consoleSignIn(t *testing.T, p *page, url, tok string) {
	t.Helper()
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.Navigate(url+"/admin"),
		chromedp.WaitVisible(chromedp.ID("token-form")),
		chromedp.SetValue(chromedp.ID("token"), tok),
		chromedp.Click(chromedp.ID("signin-button")),
	))
}

// startConsoleWorker runs the types flaky (fails at once with
// hostileError) and slow (one at a time, runs until canceled).
func startConsoleWorker(t *testing.T, sys *system) {
	t.Helper()
	w, err := worker.New(worker.Config{Conn: sys.res.JS.Conn(), Name: "console-worker-1", NewcomerSlots: -1, DrainTimeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[consoleParams]{Name: "flaky", ContentType: "text/plain", Schema: consoleSchema,
		Work: func(context.Context, *worker.Job[consoleParams]) error {
			return worker.Permanent(errors.New(hostileError))
		}}))
	require.NoError(t, worker.Register(w, worker.Type[consoleParams]{Name: "slow", ContentType: "text/plain", Schema: consoleSchema,
		Concurrency: 1,
		Work: func(ctx context.Context, _ *worker.Job[consoleParams]) error {
			<-ctx.Done() // until canceled (or the worker stops)
			return ctx.Err()
		}}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
}

// TestConsole is an operator's round in a real Chromium: sign in, read the
// stats and the jobs submitted through the API, filter by state (kept in
// the URL across a reload), open a failed job and read its attempt's error
// (hostile markup, shown as text), retry it and follow the link to the new
// job, cancel a queued job, bulk-cancel a filter after its dry run, pause
// and resume a type, see the workers; the token stays out of localStorage
// and every URL.
func TestConsole(t *testing.T) {
	sys := startSystem(t, false)
	startConsoleWorker(t, sys)
	owner := sys.token(t, "4", "reviewer-47")
	report := sys.submitJob(t, owner, "c-report", `{"type":"permit_report","params":{"case_id":47,"revision":1,"pages":1}}`)
	failed := sys.submitWhenDeclared(t, owner, "c-flaky", `{"type":"flaky","params":{"n":1}}`)
	running := sys.submitWhenDeclared(t, owner, "c-slow-1", `{"type":"slow","params":{"n":1}}`)
	stateOf := func() map[string]job.State {
		out := map[string]job.State{}
		for _, j := range sys.listJobs(t, owner) {
			out[j.ID] = j.State
		}
		return out
	}
	require.Eventually(t, func() bool { return stateOf()[running] == job.StateRunning }, 30*time.Second, 50*time.Millisecond)
	queued := sys.submitJob(t, owner, "c-slow-2", `{"type":"slow","params":{"n":2}}`)
	require.Eventually(t, func() bool {
		s := stateOf()
		return s[report] == job.StateSucceeded && s[failed] == job.StateFailed
	}, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, job.StateQueued, stateOf()[queued], "the slow type runs one job at a time")
	op := sys.mintRole(t, auth.Identity{Operator: true, Requester: "ops-1"})

	p := openBrowser(t)
	net := recordNetwork(t, p, sys.url)
	var dialogs atomic.Int32
	var urlsMu sync.Mutex
	var urls []string // every address the tab showed, fragments included
	require.NoError(t, chromedp.Listen(p.ctx, func(ev any) {
		switch ev := ev.(type) {
		case *cdpage.EventJavascriptDialogOpening:
			dialogs.Add(1)
		case *cdpage.EventNavigatedWithinDocument:
			urlsMu.Lock()
			urls = append(urls, ev.URL)
			urlsMu.Unlock()
		case *cdpage.EventFrameNavigated:
			urlsMu.Lock()
			urls = append(urls, ev.Frame.URL+ev.Frame.URLFragment)
			urlsMu.Unlock()
		}
	}))

	// Sign in: the stats per type and the jobs.
	consoleSignIn(t, p, sys.url, op)
	require.NoError(t, chromedp.Do(p.ctx, chromedp.WaitVisible(chromedp.ID("view-jobs"))))
	require.Contains(t, evalJS[string](t, p, `document.getElementById('who').textContent`), "ops-1 · operator")
	stat := func(typ, k string) string {
		return `(document.querySelector('#stats-body tr[data-type=` + jsString(typ) + `] [data-k=` + jsString(k) + `]') || {}).textContent`
	}
	waitJS(t, p, stat("slow", "queued")+` === '1' && `+stat("slow", "running")+` === '1' && `+
		stat("flaky", "hour-failed")+` === '1' && `+stat("permit_report", "day-succeeded")+` === '1'`, "the stats per type")
	require.NotEqual(t, "—", evalJS[string](t, p, stat("slow", "oldest")), "the queued job's age is shown")
	waitJS(t, p, jobRows+`.length === 4`, "the four jobs listed")
	require.ElementsMatch(t, []string{report, failed, running, queued}, evalJS[[]string](t, p, jobRows))
	unlabelled := evalJS[[]string](t, p, `[...document.querySelectorAll('input, textarea, select')]
		.filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.id)`)
	require.Empty(t, unlabelled, "every control has a label")

	// Filter by state; the filter is in the URL and survives a reload.
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.SetValue(chromedp.ID("f-state"), "failed"),
		chromedp.Click(chromedp.ID("filter-apply")),
	))
	waitJS(t, p, jobRows+`.join() === `+jsString(failed), "the failed job alone")
	require.Contains(t, evalJS[string](t, p, `location.hash`), "state=failed")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Reload()))
	waitJS(t, p, `!document.getElementById('view-jobs').hidden && `+jobRows+`.join() === `+jsString(failed),
		"the filtered list after a reload")
	require.Equal(t, "failed", evalJS[string](t, p, `document.getElementById('f-state').value`))

	// The failed job: its attempt's error, verbatim and inert.
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(`#jobs-body tr[data-job-id="`+failed+`"] a`))))
	waitJS(t, p, `(() => { const v = document.getElementById('view-job');
		return v.dataset.jobId === `+jsString(failed)+` && v.dataset.state === 'failed' &&
		  document.querySelectorAll('#attempts-body tr').length >= 1; })()`, "the failed job's detail")
	attemptError := evalJS[string](t, p, `document.querySelector('#attempts-body tr pre').textContent`)
	require.Equal(t, hostileError, attemptError, "the attempt's full error message, as text")
	require.Contains(t, evalJS[string](t, p, `document.querySelector('#attempts-body tr').innerText`), "console-worker-1",
		"the attempt names its worker")
	require.Zero(t, evalJS[int](t, p, `document.querySelectorAll('img[src=x], script:not([src])').length`),
		"no element was made of the error")
	require.True(t, evalJS[bool](t, p, `window.__xss === undefined`), "no handler of the error ran")

	// Retry it: a new job, linked both ways. It failed permanently, so the
	// console asks first, and the confirmed retry says so
	// (?confirm_permanent=true). The first answer is lost on its way back
	// after the server made the job; the console sends the request again
	// with the same Idempotency-Key, and the server replays that job
	// instead of making a second one.
	var lost atomic.Int32
	intercept(t, p, func(ctx context.Context, ev fetch.EventRequestPaused) error {
		if lost.Add(1) == 1 {
			_, err := chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonConnectionReset})
			return err
		}
		return pass(ctx, ev)
	}, &fetch.RequestPattern{URLPattern: "*/v1/admin/jobs/" + failed + "/retry*", RequestStage: fetch.RequestStageResponse})
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.ID("d-retry"))))
	waitJS(t, p, `!document.getElementById('d-retry-confirm').hidden`, "the question a permanent failure's retry asks")
	require.Contains(t, evalJS[string](t, p, `document.getElementById('d-retry-question').textContent`), "failed permanently (handler_error")
	require.Zero(t, lost.Load(), "nothing sent before the confirmation")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.ID("d-retry-anyway"))))
	waitJS(t, p, `!!document.querySelector('#d-retried-as a')`, "the retried_as link")
	retry := evalJS[string](t, p, `document.querySelector('#d-retried-as a').textContent`)
	require.NotEqual(t, failed, retry)
	old := sys.adminGet(t, op, "/v1/admin/jobs/"+failed)
	require.Equal(t, retry, old["retried_as"])
	require.Equal(t, "failed", old["state"], "the old job keeps its state")
	posts := net.matching(func(r sentRequest) bool {
		return r.method == "POST" && r.path == "/v1/admin/jobs/"+failed+"/retry?confirm_permanent=true"
	})
	require.Len(t, posts, 2, "the request whose answer was lost, and its resend")
	require.NotEmpty(t, posts[0].header("Idempotency-Key"))
	require.Equal(t, posts[0].header("Idempotency-Key"), posts[1].header("Idempotency-Key"), "one key per click")
	flaky := sys.adminGet(t, op, "/v1/admin/jobs?type=flaky")["jobs"].([]any)
	require.Len(t, flaky, 2, "one retry, however often it was sent")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(`#d-retried-as a`))))
	waitJS(t, p, `document.getElementById('view-job').dataset.jobId === `+jsString(retry)+` &&
		(document.querySelector('#d-retry-of a') || {}).textContent === `+jsString(failed), "the new job, linked to the old")
	require.Equal(t, failed, sys.adminGet(t, op, "/v1/admin/jobs/"+retry)["retry_of"])

	// Cancel the queued job from its detail. It waits for its type's one
	// busy worker: nothing to say. Paused (through the API), its type is
	// flagged in the stats and the job says it waits for the resume.
	evalJS[chromedp.Void](t, p, `location.hash = 'view=jobs&state=queued'`)
	waitJS(t, p, jobRows+`.join() === `+jsString(queued), "the queued job alone")
	require.Equal(t, "1", evalJS[string](t, p, stat("slow", "workers")), "the slow type's live worker")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(`#jobs-body tr[data-job-id="`+queued+`"] a`))))
	waitJS(t, p, `document.getElementById('view-job').dataset.jobId === `+jsString(queued)+` && !document.getElementById('d-cancel').disabled`,
		"the queued job's detail")
	require.True(t, evalJS[bool](t, p, `document.getElementById('d-waiting').hidden`), "a worker of its type is there")
	sys.adminPost(t, op, "/v1/admin/types/slow/pause")
	evalJS[chromedp.Void](t, p, `location.hash = 'view=jobs&state=queued'`)
	waitJS(t, p, `(document.querySelector('#stats-body tr[data-type=slow] td.flag') || {}).textContent === '1, paused — jobs wait for the resume'`,
		"the paused type with work, flagged")
	evalJS[chromedp.Void](t, p, `location.hash = 'view=job&id=`+queued+`'`)
	waitJS(t, p, `document.getElementById('d-waiting').dataset.waitingFor === 'resume' && !document.getElementById('d-waiting').hidden`,
		"the queued job waits for the resume")
	require.Contains(t, evalJS[string](t, p, `document.getElementById('d-waiting').textContent`), "an operator paused slow")
	sys.adminPost(t, op, "/v1/admin/types/slow/resume")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.ID("d-cancel"))))
	waitJS(t, p, `document.getElementById('view-job').dataset.state === 'canceled'`, "the job shown canceled")
	require.Equal(t, "canceled", sys.adminGet(t, op, "/v1/admin/jobs/"+queued)["state"])

	// Bulk cancel of a filter: a dry run counts, nothing changes until the
	// confirm.
	evalJS[chromedp.Void](t, p, `location.hash = 'view=jobs&type=slow'`)
	waitJS(t, p, jobRows+`.length === 2 && !document.getElementById('bulk-cancel').disabled`, "the slow jobs")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.ID("bulk-cancel"))))
	waitJS(t, p, `!document.getElementById('bulk-confirm').hidden`, "the dry run's question")
	require.Equal(t, "1", evalJS[string](t, p, `document.getElementById('bulk-confirm').dataset.count`), "one slow job is still running")
	require.Contains(t, evalJS[string](t, p, `document.getElementById('bulk-question').textContent`), "Cancel 1 of the 2 jobs")
	require.Equal(t, "running", sys.adminGet(t, op, "/v1/admin/jobs/"+running)["state"], "a dry run changes nothing")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.ID("bulk-go"))))
	waitJS(t, p, `document.getElementById('bulk-status').textContent.startsWith('Canceled 1 job;')`, "the bulk cancel's outcome")
	require.Equal(t, "canceled", sys.adminGet(t, op, "/v1/admin/jobs/"+running)["state"])
	dry := net.matching(func(r sentRequest) bool { return r.method == "POST" && r.path == "/v1/admin/jobs/cancel" })
	require.Len(t, dry, 2, "one dry run, one call")

	// The types: pause and resume one.
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.ID("nav-types"))))
	waitJS(t, p, `!!document.querySelector('#types-body tr[data-type=slow][data-paused=false] [data-act=pause]')`, "the slow type")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(`#types-body tr[data-type=slow] [data-act=pause]`))))
	waitJS(t, p, `!!document.querySelector('#types-body tr[data-type=slow][data-paused=true] [data-act=resume]')`, "the slow type paused")
	require.Equal(t, true, sys.adminGet(t, op, "/v1/types/slow")["paused"])
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(`#types-body tr[data-type=slow] [data-act=resume]`))))
	waitJS(t, p, `!!document.querySelector('#types-body tr[data-type=slow][data-paused=false]')`, "the slow type resumed")
	require.Equal(t, false, sys.adminGet(t, op, "/v1/types/slow")["paused"])

	// The workers.
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.ID("nav-workers"))))
	waitJS(t, p, `!!document.querySelector('#workers-body tr[data-worker="console-worker-1"]')`, "the worker process")
	require.Contains(t, evalJS[string](t, p, `document.querySelector('#workers-body tr[data-worker="console-worker-1"]').innerText`), "slow (")

	// The jobs, for the record.
	evalJS[chromedp.Void](t, p, `location.hash = 'view=jobs'`)
	waitJS(t, p, jobRows+`.length === 5`, "the five jobs listed")
	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	shotPath := filepath.Join(t.TempDir(), "console.png")
	require.NoError(t, os.WriteFile(shotPath, shot, 0o644))
	t.Logf("screenshot of the console: %s (%d bytes)", shotPath, len(shot))
	if *updateDocs {
		require.NoError(t, os.WriteFile(filepath.Join("..", "..", "docs", "console.png"), shot, 0o644))
	}

	// The token: this tab's session storage only, never localStorage or a URL.
	require.Equal(t, op, evalJS[string](t, p, `sessionStorage.getItem('jobgate.console.token')`))
	require.Zero(t, evalJS[int](t, p, `localStorage.length`), "nothing in localStorage")
	require.NotContains(t, evalJS[string](t, p, `location.href`), op)
	urlsMu.Lock()
	shown := slices.Clone(urls)
	urlsMu.Unlock()
	require.NotEmpty(t, shown)
	for _, u := range shown {
		require.False(t, strings.Contains(u, op) || strings.Contains(u, "eyJ"), "a bearer token ended up in the address: %s", u)
	}
	sent := net.matching(func(sentRequest) bool { return true })
	require.NotEmpty(t, sent)
	for _, r := range sent {
		require.False(t, strings.Contains(r.path, op) || strings.Contains(r.path, "eyJ"), "a bearer token ended up in a URL: %s", r.path)
		if strings.HasPrefix(r.path, "/v1/") {
			require.Equal(t, "Bearer "+op, r.header("Authorization"), r.path)
		}
	}
	require.Zero(t, dialogs.Load(), "no alert opened")

	// Sign out: back to the sign-in, the token gone.
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("token-form"))))
	require.Equal(t, "", evalJS[string](t, p, `sessionStorage.getItem('jobgate.console.token') || ''`))
}

// TestConsoleRoles: a requester token is told it is no admin or operator
// token and stays out; a tenant admin gets in without the operator's
// views; a token the server rejects (401) is sent back to the sign-in.
func TestConsoleRoles(t *testing.T) {
	sys := startSystem(t, false)
	p := openBrowser(t)
	p.net = recordNetwork(t, p, sys.url)

	consoleSignIn(t, p, sys.url, sys.token(t, "4", "reviewer-47"))
	waitJS(t, p, `document.getElementById('signin-error').textContent.toLowerCase().includes('this token is not an admin or operator token')`,
		"the 403 message")
	require.True(t, evalJS[bool](t, p, `document.getElementById('app').hidden`), "a requester stays at the sign-in")
	require.Equal(t, "", evalJS[string](t, p, `sessionStorage.getItem('jobgate.console.token') || ''`))

	admin := sys.mintRole(t, auth.Identity{Tenant: "4", Requester: "lead-1", Admin: true})
	consoleSignIn(t, p, sys.url, admin)
	require.NoError(t, chromedp.Do(p.ctx, chromedp.WaitVisible(chromedp.ID("view-jobs"))))
	require.True(t, evalJS[bool](t, p, `document.getElementById('nav-types').hidden && document.getElementById('nav-workers').hidden &&
		document.getElementById('f-tenant-field').hidden`), "a tenant admin has no tenant filter, types or workers")

	// A token this server did not sign: the first answer is 401, and the
	// console is back at its sign-in, saying why.
	forged, err := auth.Mint([]byte("another-secret"), auth.Identity{Operator: true, Requester: "ops-1"}, time.Hour, time.Now())
	require.NoError(t, err)
	evalJS[chromedp.Void](t, p, `sessionStorage.setItem('jobgate.console.token', `+jsString(forged)+`)`)
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Reload()))
	waitJS(t, p, `!document.getElementById('signin').hidden && document.getElementById('app').hidden &&
		document.getElementById('signin-error').textContent.includes('expired or was rejected')`, "the 401 back to sign-in")
	require.Equal(t, "", evalJS[string](t, p, `sessionStorage.getItem('jobgate.console.token') || ''`))
}

// hostileNote is a job param a console that made markup of would run.
const hostileNote = `<img src=x onerror="window.__xss=3"><b>bold</b>`

type notedParams struct {
	Note string `json:"note"`
}

// startNotedWorker runs the type noted, whose param is free text and
// whose jobs fail at once.
func startNotedWorker(t *testing.T, sys *system) {
	t.Helper()
	w, err := worker.New(worker.Config{Conn: sys.res.JS.Conn(), Name: "console-worker-2", NewcomerSlots: -1, DrainTimeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[notedParams]{Name: "noted", ContentType: "text/plain",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"note":{"type":"string","maxLength":200}}}`),
		Work: func(context.Context, *worker.Job[notedParams]) error {
			return worker.Permanent(errors.New("no"))
		}}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
}

// adminPost is a POST of the admin API without a body, answered 200.
func (s *system) adminPost(t *testing.T, tok, path string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "POST %s: %s", path, body)
}

// cancelAsOwner cancels a job through the requester API.
func (s *system) cancelAsOwner(t *testing.T, tok, id string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, s.url+"/v1/jobs/"+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
}

// pressTabUntil presses Tab until expr holds for the focused element, at
// most n times.
func pressTabUntil(t *testing.T, p *page, expr string, n int, what string) {
	t.Helper()
	for range n {
		if evalJS[bool](t, p, `(() => { const e = document.activeElement; return !!e && (`+expr+`); })()`) {
			return
		}
		require.NoError(t, chromedp.Do(p.ctx, chromedp.KeyEvent("\t")))
	}
	t.Fatalf("%s: not reached with %d presses of Tab; focus on %s", what, n,
		evalJS[string](t, p, `document.activeElement ? document.activeElement.outerHTML.slice(0, 200) : ''`))
}

// TestConsoleLive: the console over its one event stream. A job's change
// shows in the list and on an open job's page without a reload, over one
// GET /v1/admin/events and no polling of the stats while it is up; the
// chart draws the last hour's finishes; a hostile param is text; a
// succeeded job has its result link; the keyboard alone opens a failed job
// and retries it, with the focus visible; at 375 px nothing scrolls
// sideways.
func TestConsoleLive(t *testing.T) {
	sys := startSystem(t, false)
	startConsoleWorker(t, sys)
	startNotedWorker(t, sys)
	owner := sys.token(t, "4", "reviewer-47")
	report := sys.submitJob(t, owner, "l-report", `{"type":"permit_report","params":{"case_id":47,"revision":1,"pages":1}}`)
	failed := sys.submitWhenDeclared(t, owner, "l-flaky", `{"type":"flaky","params":{"n":1}}`)
	noted := sys.submitWhenDeclared(t, owner, "l-noted", `{"type":"noted","params":{"note":`+jsString(hostileNote)+`}}`)
	stateOf := func() map[string]job.State {
		out := map[string]job.State{}
		for _, j := range sys.listJobs(t, owner) {
			out[j.ID] = j.State
		}
		return out
	}
	require.Eventually(t, func() bool {
		s := stateOf()
		return s[report] == job.StateSucceeded && s[failed] == job.StateFailed && s[noted] == job.StateFailed
	}, 60*time.Second, 50*time.Millisecond)
	op := sys.mintRole(t, auth.Identity{Operator: true, Requester: "ops-1"})

	p := openBrowser(t)
	net := recordNetwork(t, p, sys.url)
	isStats := func(r sentRequest) bool { return r.method == "GET" && r.path == "/v1/admin/stats?series=minutes" } // not the sign-in's probe
	isList := func(r sentRequest) bool { return r.method == "GET" && strings.HasPrefix(r.path, "/v1/admin/jobs?") }
	isStream := func(r sentRequest) bool { return r.method == "GET" && strings.HasPrefix(r.path, "/v1/admin/events") }
	// Every timer the console sets for loadStats is counted: pending (set,
	// not cleared, not fired) and fired.
	_, err := chromedp.Call(p.ctx, cdpage.AddScriptToEvaluateOnNewDocument, cdpage.AddScriptToEvaluateOnNewDocumentParams{Source: `(() => {
		const set = window.setTimeout, clear = window.clearTimeout, pending = new Set();
		window.__statsTimers = { fired: 0, pending };
		window.setTimeout = function (fn, ms, ...args) {
			if (typeof fn !== 'function' || fn.name !== 'loadStats') return set.call(window, fn, ms, ...args);
			const id = set.call(window, () => { pending.delete(id); window.__statsTimers.fired++; fn(); }, ms);
			pending.add(id);
			return id;
		};
		window.clearTimeout = function (id) { pending.delete(id); return clear.call(window, id); };
	})()`})
	require.NoError(t, err)
	consoleSignIn(t, p, sys.url, op)
	waitJS(t, p, `document.getElementById('live-status').dataset.live === 'on'`, "the live stream up")
	waitJS(t, p, jobRows+`.length === 3`, "the three jobs")

	// The chart: the last hour's finishes, by state, per type.
	waitJS(t, p, `document.getElementById('chart').dataset.succeeded === '1' && document.getElementById('chart').dataset.failed === '2'`,
		"the chart's totals")
	require.GreaterOrEqual(t, evalJS[int](t, p, `document.querySelectorAll('#chart svg rect.bar-failed').length`), 1, "a failed bar")
	require.GreaterOrEqual(t, evalJS[int](t, p, `document.querySelectorAll('#chart svg rect.bar-succeeded').length`), 1, "a succeeded bar")
	require.Equal(t, 3, evalJS[int](t, p, `[...document.querySelectorAll('#chart svg rect')].reduce((n, r) => n + Number(r.dataset.n), 0)`))
	require.NoError(t, chromedp.Do(p.ctx, chromedp.SetValue(chromedp.ID("chart-type"), "flaky")))
	evalJS[chromedp.Void](t, p, `document.getElementById('chart-type').dispatchEvent(new Event('change'))`)
	waitJS(t, p, `document.getElementById('chart').dataset.failed === '1' && document.getElementById('chart').dataset.succeeded === '0'`,
		"the flaky type's chart")
	require.Contains(t, evalJS[string](t, p, `document.getElementById('chart-summary').textContent`), "flaky, last hour: 0 succeeded, 1 failed")

	// A change made elsewhere shows in the list, without a reload.
	evalJS[chromedp.Void](t, p, `window.__notReloaded = true`)
	slow := sys.submitWhenDeclared(t, owner, "l-slow", `{"type":"slow","params":{"n":1}}`)
	waitJS(t, p, `!!document.querySelector('#jobs-body tr[data-job-id=`+jsString(slow)+`]')`, "the new job listed")
	sys.cancelAsOwner(t, owner, slow)
	waitJS(t, p, `(document.querySelector('#jobs-body tr[data-job-id=`+jsString(slow)+`]') || {dataset: {}}).dataset.state === 'canceled'`,
		"the cancel shown live")
	waitJS(t, p, `(document.querySelector('#stats-body tr[data-type=slow] [data-k=hour-canceled]') || {}).textContent === '1'`,
		"the stats read again")
	require.True(t, evalJS[bool](t, p, `window.__notReloaded === true`), "no reload")

	// An open job follows its changes over the same stream.
	running := sys.submitWhenDeclared(t, owner, "l-slow-2", `{"type":"slow","params":{"n":2}}`)
	require.Eventually(t, func() bool { return stateOf()[running] == job.StateRunning }, 30*time.Second, 50*time.Millisecond)
	evalJS[chromedp.Void](t, p, `location.hash = 'view=job&id=`+running+`'`)
	waitJS(t, p, `document.getElementById('view-job').dataset.state === 'running'`, "the running job")
	sys.cancelAsOwner(t, owner, running)
	waitJS(t, p, `document.getElementById('view-job').dataset.state === 'canceled' &&
		!!document.querySelector('#d-events li[data-kind=live]')`, "the open job's cancel, live, in its events")
	require.Contains(t, evalJS[string](t, p, `document.getElementById('d-events').textContent`), "Attempt 1 started on console-worker-1")
	require.Len(t, net.matching(isStream), 1, "one event stream:\n%s", net)

	// A hostile param is text.
	evalJS[chromedp.Void](t, p, `location.hash = 'view=job&id=`+noted+`'`)
	waitJS(t, p, `document.getElementById('view-job').dataset.jobId === `+jsString(noted)+` && document.getElementById('d-params').textContent.length > 0`,
		"the noted job")
	require.Contains(t, evalJS[string](t, p, `document.getElementById('d-params').textContent`), `"note": `+jsString(hostileNote))
	require.Zero(t, evalJS[int](t, p, `document.querySelectorAll('#view-job img, #view-job b').length`), "no element was made of the param")
	require.True(t, evalJS[bool](t, p, `window.__xss === undefined`))

	// A succeeded job's result, through a link minted for the role.
	evalJS[chromedp.Void](t, p, `location.hash = 'view=job&id=`+report+`'`)
	waitJS(t, p, `!document.getElementById('d-result').hidden`, "the result link")
	var resp *http.Response
	href := evalJS[string](t, p, `document.getElementById('d-result-link').getAttribute('href')`)
	require.True(t, strings.HasPrefix(href, "/v1/results/"), href)
	resp, err = http.Get(sys.url + href)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the link needs no token")

	// The keyboard alone: from the top of the list to the failed job, to
	// its retry, the focus drawn all the way.
	evalJS[chromedp.Void](t, p, `location.hash = 'view=jobs&type=flaky'`)
	waitJS(t, p, jobRows+`.join() === `+jsString(failed), "the flaky job")
	evalJS[chromedp.Void](t, p, `document.activeElement.blur(); window.scrollTo(0, 0)`)
	pressTabUntil(t, p, `e.closest && !!e.closest('#jobs-body tr[data-job-id=`+jsString(failed)+`]')`, 60, "the failed job's link")
	require.Equal(t, "solid", evalJS[string](t, p, `getComputedStyle(document.activeElement).outlineStyle`), "the focus is drawn")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.KeyEvent("\r")))
	waitJS(t, p, `document.getElementById('view-job').dataset.jobId === `+jsString(failed)+` && !document.getElementById('d-retry').disabled`,
		"the failed job opened by Enter")
	pressTabUntil(t, p, `e.id === 'd-retry'`, 20, "the retry button")
	require.Equal(t, "solid", evalJS[string](t, p, `getComputedStyle(document.activeElement).outlineStyle`), "the focus is drawn")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.KeyEvent("\r")))
	// It failed permanently: the question takes the focus, and Enter
	// confirms.
	waitJS(t, p, `!document.getElementById('d-retry-confirm').hidden && document.activeElement.id === 'd-retry-anyway'`,
		"the confirmation, focused")
	require.NoError(t, chromedp.Do(p.ctx, chromedp.KeyEvent("\r")))
	waitJS(t, p, `!!document.querySelector('#d-retried-as a')`, "retried by Enter")

	// While the stream was up the stats were read only with the list (the
	// first look, and each change the stream brought), never on a timer.
	evalJS[chromedp.Void](t, p, `location.hash = 'view=jobs'`)
	waitJS(t, p, jobRows+`.length === 6`, "the six jobs")
	require.Len(t, net.matching(isStream), 1, "one event stream:\n%s", net)
	require.LessOrEqual(t, len(net.matching(isStats)), len(net.matching(isList)), "no stats polled:\n%s", net)
	require.True(t, evalJS[bool](t, p, `window.__statsTimers.pending.size === 0 && window.__statsTimers.fired === 0`),
		"no timer reads the stats while the stream is up")

	// A phone: 375 px wide, no view wider than the screen.
	_, err = chromedp.Call(p.ctx, emulation.SetDeviceMetricsOverride,
		emulation.SetDeviceMetricsOverrideParams{Width: 375, Height: 812, DeviceScaleFactor: 2, Mobile: true})
	require.NoError(t, err)
	noSideways := `document.documentElement.scrollWidth <= document.documentElement.clientWidth && document.documentElement.clientWidth <= 375`
	for _, hash := range []string{"view=jobs", "view=job&id=" + failed, "view=job&id=" + noted, "view=types", "view=workers"} {
		evalJS[chromedp.Void](t, p, `location.hash = `+jsString(hash))
		waitJS(t, p, `(() => { const v = [...document.querySelectorAll('#app > [id^=view-]')].find(v => !v.hidden);
			return !!v && v.querySelectorAll('tbody tr, #d-events li').length > 0; })()`, "the view "+hash)
		require.True(t, evalJS[bool](t, p, noSideways), "%s scrolls sideways at 375 px: %d > %d; too wide: %v", hash,
			evalJS[int](t, p, `document.documentElement.scrollWidth`), evalJS[int](t, p, `document.documentElement.clientWidth`),
			evalJS[[]string](t, p, `[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 376 && !e.closest('.scroll'))
				.slice(-8).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))`))
	}
}
