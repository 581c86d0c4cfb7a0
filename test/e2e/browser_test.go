package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

var updateDocs = flag.Bool("update-docs", false, "write the finished page's screenshot to docs/page.png")

// netLog records what the tab sent: every request with the headers the page
// set, and which requests the page canceled.
type netLog struct {
	mu       sync.Mutex
	requests []sentRequest
	canceled map[network.RequestID]bool
}

type sentRequest struct {
	id      network.RequestID
	method  string
	path    string
	headers network.Headers
}

func (r sentRequest) header(name string) string {
	for k, v := range r.headers {
		if strings.EqualFold(k, name) {
			s, _ := v.(string)
			return s
		}
	}
	return ""
}

func recordNetwork(t *testing.T, p *page, base string) *netLog {
	t.Helper()
	l := &netLog{canceled: map[network.RequestID]bool{}}
	require.NoError(t, chromedp.Listen(p.ctx, func(ev any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if path, ok := strings.CutPrefix(ev.Request.URL, base); ok {
				l.requests = append(l.requests, sentRequest{id: ev.RequestID, method: ev.Request.Method, path: path, headers: ev.Request.Headers})
			}
		case *network.EventLoadingFailed:
			if ev.Canceled {
				l.canceled[ev.RequestID] = true
			}
		}
	}))
	p.net = l
	return l
}

// matching returns the requests for which keep is true, in the order sent.
func (l *netLog) matching(keep func(sentRequest) bool) []sentRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sentRequest
	for _, r := range l.requests {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

func (l *netLog) String() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.requests {
		fmt.Fprintf(&b, "  %s %s canceled=%v last-event-id=%q\n", r.method, r.path, l.canceled[r.id], r.header("Last-Event-ID"))
	}
	return b.String()
}

func (l *netLog) wasCanceled(id network.RequestID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.canceled[id]
}

func submits(r sentRequest) bool { return r.method == "POST" && r.path == "/v1/jobs" }

func eventStreams(jobID string) func(sentRequest) bool {
	return func(r sentRequest) bool { return r.method == "GET" && r.path == "/v1/jobs/"+jobID+"/events" }
}

// viewShows waits until the live view shows the job in the state.
func viewShows(t *testing.T, p *page, jobID string, state job.State) {
	t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](
		`(() => { const v = document.getElementById('view');
		  return v.dataset.jobId === `+jsString(jobID)+` && v.dataset.state === `+jsString(string(state))+`; })()`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	if err != nil {
		dump, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.getElementById('main').innerText`))
		t.Fatalf("the live view never showed %s as %s: %v\npage text:\n%s\nrequests:\n%s", jobID, state, err, dump, p.net.String())
	}
}

func jsString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(" ")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func evalJS[T any](t *testing.T, p *page, expr string) T {
	t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, "evaluate %s", expr)
	return v
}

// doubleClick is what a hurried user does: two full clicks in a row on the
// same spot, as the browser receives them from a mouse.
func doubleClick(t *testing.T, p *page, id string) {
	t.Helper()
	xy := evalJS[[]float64](t, p, `(() => { const r = document.getElementById(`+jsString(id)+`).getBoundingClientRect();
		return [r.x + r.width / 2, r.y + r.height / 2]; })()`)
	require.Len(t, xy, 2)
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.MouseClickXY(xy[0], xy[1], chromedp.ClickCount(1)),
		chromedp.MouseClickXY(xy[0], xy[1], chromedp.ClickCount(2)),
	))
}

// TestReviewerPage is the reviewer's whole errand in a real Chromium: sign
// in, request a 12-page report with a double click, reload while it
// renders, watch it finish, download the PDF. The server must hold exactly
// one job for that click.
func TestReviewerPage(t *testing.T) {
	sys := startSystem(t, true) // renders wait at their start until the gate opens
	p := openBrowser(t)
	net := recordNetwork(t, p, sys.url)

	// Sign in with the development form (jobgate serve --dev).
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.Navigate(sys.url+"/"),
		chromedp.WaitVisible(chromedp.ID("dev-form")),
		chromedp.Clear(chromedp.ID("dev-tenant")), chromedp.SendKeys(chromedp.ID("dev-tenant"), "4"),
		chromedp.Clear(chromedp.ID("dev-subject")), chromedp.SendKeys(chromedp.ID("dev-subject"), "reviewer-47"),
		chromedp.Click(chromedp.ID("dev-signin")),
		chromedp.WaitVisible(chromedp.ID("request-form")),
	))
	who, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.ID("who")))
	require.NoError(t, err)
	require.Contains(t, who, "reviewer-47")
	unlabelled := evalJS[[]string](t, p, `[...document.querySelectorAll('input, textarea, select, progress')]
		.filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.id)`)
	require.Empty(t, unlabelled, "every control has a label")
	require.Equal(t, "polite", evalJS[string](t, p, `document.getElementById('announce').getAttribute('aria-live')`))
	require.Equal(t, "case", evalJS[string](t, p, `document.activeElement.id`), "after sign-in the keyboard is in the form")

	// Request a 12-page report: type it in, then double-click the button.
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.SendKeys(chromedp.ID("case"), "47"),
		chromedp.SendKeys(chromedp.ID("revision"), "29"),
		chromedp.Clear(chromedp.ID("pages")), chromedp.SendKeys(chromedp.ID("pages"), "12"),
	))
	doubleClick(t, p, "request")

	// The render starts and is held there: the page shows the job running.
	var jobID string
	select {
	case jobID = <-sys.gate.started:
	case <-time.After(60 * time.Second):
		t.Fatal("no render started after the click")
	}
	viewShows(t, p, jobID, job.StateRunning)

	// Reload mid-render: the page comes back with the same job, still
	// running, and a live stream for it.
	streamsBefore := len(net.matching(eventStreams(jobID)))
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Reload()))
	viewShows(t, p, jobID, job.StateRunning)
	require.Equal(t, 1, evalJS[int](t, p, `document.querySelectorAll('#jobs li').length`), "the list shows one job")
	require.Eventually(t, func() bool { return len(net.matching(eventStreams(jobID))) > streamsBefore },
		10*time.Second, 20*time.Millisecond, "no event stream after the reload")
	_, err = chromedp.Run(p.ctx, chromedp.Poll[bool](`document.getElementById('job-live').textContent.startsWith('Live updates on')`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err)

	// Hide the tab (another tab comes to the front): the stream is closed.
	// Show it again: the page resumes where it was, with Last-Event-ID.
	stream := net.matching(eventStreams(jobID))
	current := stream[len(stream)-1]
	other, closeOther := chromedp.NewContext(p.ctx, chromedp.WithNewWindow(false))
	require.NoError(t, chromedp.Do(other, chromedp.Navigate("about:blank")))
	require.Equal(t, "hidden", evalJS[string](t, p, `document.visibilityState`))
	require.Eventually(t, func() bool { return net.wasCanceled(current.id) }, 10*time.Second, 20*time.Millisecond,
		"the event stream stayed open while the tab was hidden")
	_, err = chromedp.CallBrowser(p.ctx, target.ActivateTarget,
		target.ActivateTargetParams{TargetID: chromedp.FromContext(p.ctx).Target.TargetID})
	require.NoError(t, err)
	closeOther()
	require.Equal(t, "visible", evalJS[string](t, p, `document.visibilityState`))
	var resumed sentRequest
	require.Eventually(t, func() bool {
		s := net.matching(eventStreams(jobID))
		resumed = s[len(s)-1]
		return resumed.id != current.id
	}, 10*time.Second, 20*time.Millisecond, "the event stream did not resume when the tab was shown")
	require.NotEmpty(t, resumed.header("Last-Event-ID"), "the resumed stream must say what the page already has")
	require.True(t, strings.HasPrefix(resumed.header("Authorization"), "Bearer "), "the stream authenticates in a header")

	// Watch the progress bar from here to the end, then let the render go.
	evalJS[chromedp.Void](t, p, `(() => { const bar = document.getElementById('job-progress'); window.__seen = [];
		new MutationObserver(() => window.__seen.push(bar.value)).observe(bar, {attributes: true}); })()`)
	sys.gate.open()
	viewShows(t, p, jobID, job.StateSucceeded)
	_, err = chromedp.Run(p.ctx, chromedp.Poll[bool](`!document.getElementById('download').disabled`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err)
	require.Equal(t, 12.0, evalJS[float64](t, p, `document.getElementById('job-progress').value`))
	require.Equal(t, 12.0, evalJS[float64](t, p, `document.getElementById('job-progress').max`))
	require.Equal(t, "12 of 12 pages", evalJS[string](t, p, `document.getElementById('job-progress-text').textContent`))
	seen := evalJS[[]float64](t, p, `window.__seen`)
	t.Logf("progress values the page showed after the reload: %v", seen)
	require.True(t, slices.IsSorted(seen), "progress went backwards: %v", seen)
	require.NotEmpty(t, evalJS[string](t, p, `document.getElementById('job-finished').getAttribute('datetime') || ''`))
	_, err = chromedp.Run(p.ctx, chromedp.Poll[bool](`document.getElementById('announce').textContent.startsWith('Report ready')`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the finished report was not announced")

	// The finished state, for the record and for the README.
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Focus(chromedp.ID("download"))))
	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	shotPath := filepath.Join(t.TempDir(), "reviewer-page.png")
	require.NoError(t, os.WriteFile(shotPath, shot, 0o644))
	t.Logf("screenshot of the finished state: %s (%d bytes)", shotPath, len(shot))
	if *updateDocs {
		require.NoError(t, os.WriteFile(filepath.Join("..", "docs", "page.png"), shot, 0o644))
	}

	// Download: the button follows a freshly signed, short-lived link.
	begins := chromedp.BrowserEvents(p.ctx, browser.DownloadWillBegin)
	downloads := chromedp.BrowserEvents(p.ctx, browser.DownloadProgress)
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Click(chromedp.ID("download"))))
	for ev, err := range begins {
		require.NoError(t, err)
		path, _ := strings.CutPrefix(ev.URL, sys.url)
		require.True(t, strings.HasPrefix(path, "/v1/results/"), "the download did not use a signed result link: %s", ev.URL)
		break
	}
	var file string
	for ev, err := range downloads {
		require.NoError(t, err)
		if ev.State == browser.DownloadProgressStateCanceled {
			t.Fatal("the download was canceled")
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			file = filepath.Join(p.downloads, ev.GUID)
			break
		}
	}
	pdf, err := os.ReadFile(file)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(pdf, []byte("%PDF-")), "the download is not a PDF: %q", pdf[:min(len(pdf), 16)])

	// The server holds exactly one job for that double click, and it is the
	// one the page showed; every submission the page sent used one key.
	held := sys.listJobs(t, sys.token(t, "4", "reviewer-47"))
	require.Len(t, held, 1)
	require.Equal(t, jobID, held[0].ID)
	require.Equal(t, job.StateSucceeded, held[0].State)
	require.NotNil(t, held[0].Result)
	require.EqualValues(t, held[0].Result.Size, len(pdf), "downloaded size")
	require.Greater(t, len(pdf), 1000)
	posts := net.matching(submits)
	require.NotEmpty(t, posts)
	keys := map[string]bool{}
	for _, r := range posts {
		keys[r.header("Idempotency-Key")] = true
		require.False(t, strings.Contains(r.path, "token"), "no token in a URL")
	}
	require.Len(t, keys, 1, "one click, one idempotency key")
	t.Logf("submissions sent: %d, key kept in localStorage until answered", len(posts))
	for _, r := range net.matching(func(sentRequest) bool { return true }) {
		require.NotContains(t, r.path, "eyJ", "a bearer token ended up in a URL: %s", r.path)
	}
	require.Equal(t, "", evalJS[string](t, p, `localStorage.getItem('jobgate.pending.4/reviewer-47') || ''`),
		"the answered request is no longer pending")
}
