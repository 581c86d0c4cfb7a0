package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/renderer"
	"github.com/stretchr/testify/require"
)

func batchSubmits(r sentRequest) bool { return r.method == "POST" && r.path == "/v1/batches" }

func requesterStreams(r sentRequest) bool { return r.method == "GET" && r.path == "/v1/events" }

var (
	jobStream  = regexp.MustCompile(`^/v1/(jobs|batches)/[^/?]+/events`)
	singleRead = regexp.MustCompile(`^/v1/(jobs|batches)/[^/?]+`)
)

// requestRevisions fills in the form for revisions from..to of a case.
func requestRevisions(t *testing.T, p *page, caseID, from, to, pages string) {
	t.Helper()
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.SendKeys(chromedp.ID("case"), caseID),
		chromedp.SendKeys(chromedp.ID("revision"), from),
		chromedp.SendKeys(chromedp.ID("revision-to"), to),
		chromedp.Clear(chromedp.ID("pages")), chromedp.SendKeys(chromedp.ID("pages"), pages),
	))
}

// batchRows is the batch view's job ids and states, in item order.
const batchRows = `[...document.querySelectorAll('#batch-jobs li')].map(li => li.dataset.id + ' ' + li.dataset.state)`

// TestPageWatchesABatch: three revisions requested with one click are one
// POST /v1/batches, watched over one requester stream (GET /v1/events),
// not one stream or poll per job; a reload mid-way finds the batch again
// and resumes the stream, and the view ends with all three ready and the
// stream closed.
func TestPageWatchesABatch(t *testing.T) {
	// Renders wait at their start until the gate opens; one at a time, so
	// mid-way is one job rendering and two queued.
	sys := startSystem(t, true, func(c *renderer.Config) { c.Concurrency = 1 })
	p := openBrowser(t)
	net := recordNetwork(t, p, sys.url)
	tok := sys.token(t, "4", "reviewer-12")
	signInWithToken(t, p, sys.url, tok)

	requestRevisions(t, p, "47", "1", "3", "2")
	require.Equal(t, "Request 3 reports", evalJS[string](t, p, `document.getElementById('request').textContent`))
	doubleClick(t, p, "request")
	select {
	case <-sys.gate.started:
	case <-time.After(60 * time.Second):
		t.Fatalf("no render started after the click\nrequests:\n%s", net)
	}
	waitJS(t, p, `(() => { const rows = document.querySelectorAll('#batch-jobs li');
		return rows.length === 3 && [...rows].filter(li => li.dataset.state === 'running').length === 1 &&
		  [...rows].filter(li => li.dataset.state === 'queued').length === 2; })()`,
		"the batch view shows its three jobs, one rendering")
	batchID := evalJS[string](t, p, `document.getElementById('batch').dataset.batchId`)
	require.Regexp(t, `^bat_`, batchID)
	require.Len(t, net.matching(batchSubmits), 1, "one click, one request for the three\n%s", net)
	require.Empty(t, net.matching(submits), "no job was requested alone")
	before := evalJS[[]string](t, p, batchRows)
	require.Len(t, before, 3)
	require.Contains(t, evalJS[string](t, p, `document.getElementById('batch-jobs').innerText`), "Case 47 · revision 3 · 2 pages")

	// Reload while the renders are held: the tab finds its batch again.
	require.NoError(t, chromedp.Do(p.ctx, chromedp.Reload()))
	waitJS(t, p, `document.getElementById('batch').dataset.batchId === `+jsString(batchID)+
		` && [...document.querySelectorAll('#batch-jobs li')].some(li => li.dataset.state === 'running')`+
		` && document.getElementById('batch-live').textContent === 'Live updates on.'`,
		"after the reload the batch is shown again, where it was, and its stream is open")
	require.Equal(t, before, evalJS[[]string](t, p, batchRows), "the same jobs in the same states")

	mark := len(net.matching(func(sentRequest) bool { return true }))
	sys.gate.open()
	waitJS(t, p, `document.getElementById('batch').dataset.done === 'true' &&
		[...document.querySelectorAll('#batch-jobs li')].every(li => li.dataset.state === 'succeeded')`,
		"the three jobs reach succeeded")
	require.Contains(t, evalJS[string](t, p, `document.getElementById('batch-summary').textContent`), "3 of 3 finished")

	// The server holds the three jobs of the one batch.
	held := sys.listJobs(t, tok)
	require.Len(t, held, 3, "one batch of three")
	var shown []string
	for _, r := range evalJS[[]string](t, p, batchRows) {
		shown = append(shown, r[:len(r)-len(" succeeded")])
	}
	for _, j := range held {
		require.Contains(t, shown, j.ID)
	}

	// One requester stream per page load, no stream or poll per job; after
	// the gate opened, the changes came over the stream alone.
	streams := net.matching(requesterStreams)
	require.Len(t, streams, 2, "one stream before the reload, one after\n%s", net)
	require.Empty(t, net.matching(func(r sentRequest) bool { return jobStream.MatchString(r.path) }), "no per-job or per-batch stream\n%s", net)
	after := net.matching(func(sentRequest) bool { return true })[mark:]
	require.False(t, slices.ContainsFunc(after, func(r sentRequest) bool { return r.method == "GET" && singleRead.MatchString(r.path) }),
		"no job or batch was read once the renders ran: the stream carried every change\n%s", net)
	require.Equal(t, "", evalJS[string](t, p, `document.getElementById('batch-live').textContent`))
	// The page ends the stream once the batch is done.
	last := streams[len(streams)-1]
	require.Eventually(t, func() bool { return net.wasCanceled(last.id) }, 10*time.Second, 50*time.Millisecond,
		"the page closes the requester stream once every job finished")
}

// TestPageBatchRetryKeepsItsKey: the answer to the batch's POST is lost
// after the server admitted it; the page sends the same request again with
// the same Idempotency-Key and the server holds one batch.
func TestPageBatchRetryKeepsItsKey(t *testing.T) {
	sys := startSystem(t, false)
	p := openBrowser(t)
	net := recordNetwork(t, p, sys.url)
	tok := sys.token(t, "4", "reviewer-13")
	signInWithToken(t, p, sys.url, tok)

	var mu sync.Mutex
	posts := 0
	drop := map[fetch.RequestID]bool{}
	intercept(t, p, func(ctx context.Context, ev fetch.EventRequestPaused) error {
		if ev.Request.Method != "POST" {
			return pass(ctx, ev)
		}
		mu.Lock()
		if responseStage(ev) {
			lost := drop[ev.RequestID]
			mu.Unlock()
			if lost { // the server admitted the batch; its answer never arrives
				_, err := chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonConnectionReset})
				return err
			}
			return pass(ctx, ev)
		}
		posts++
		if posts == 1 {
			drop[ev.RequestID] = true
		}
		mu.Unlock()
		return pass(ctx, ev)
	},
		&fetch.RequestPattern{URLPattern: "*/v1/batches", RequestStage: fetch.RequestStageRequest},
		&fetch.RequestPattern{URLPattern: "*/v1/batches", RequestStage: fetch.RequestStageResponse},
	)

	requestRevisions(t, p, "8", "4", "6", "1")
	require.NoError(t, chromedp.Do(p.ctx, clickRequest))
	waitJS(t, p, `document.getElementById('request-status').textContent.startsWith('The server already had this request')`,
		"the lost answer was recovered by a retry with the same key")
	waitJS(t, p, `document.getElementById('batch').dataset.done === 'true'`, "the batch finishes")

	sent := net.matching(batchSubmits)
	require.Len(t, sent, 2, "the lost answer and the replayed one\n%s", net)
	key := sent[0].header("Idempotency-Key")
	require.NotEmpty(t, key)
	require.Equal(t, key, sent[1].header("Idempotency-Key"), "the retry carries the key of the click")
	require.Len(t, sys.listJobs(t, tok), 3, "one batch of three on the server, not two")
	require.Equal(t, "", evalJS[string](t, p, `localStorage.getItem('jobgate.pending.4/reviewer-13') || ''`), "the answered request is no longer pending")
	require.Len(t, evalJS[[]string](t, p, batchRows), 3)
}

// TestPageStartsAHundredJobsWithOneRequestAndOneMail is issue 25's "done
// when", as a user does it in a browser: a hundred revisions asked for at
// once are one POST /v1/batches, watched over one requester stream to the
// end, and the requester gets one mail for the batch, listing every job,
// and none per job.
func TestPageStartsAHundredJobsWithOneRequestAndOneMail(t *testing.T) {
	const n = 100
	sys := startSystemWith(t, false, func(s *config.Config) {
		s.Notifier.Mail.Addresses = map[string]string{"4/reviewer-13": "reviewer-13@example.com"}
	}, func(c *renderer.Config) { c.Concurrency = 4 })
	p := openBrowser(t)
	net := recordNetwork(t, p, sys.url)
	tok := sys.token(t, "4", "reviewer-13")
	signInWithToken(t, p, sys.url, tok)

	requestRevisions(t, p, "47", "1", fmt.Sprint(n), "1")
	require.Equal(t, fmt.Sprintf("Request %d reports", n), evalJS[string](t, p, `document.getElementById('request').textContent`))
	doubleClick(t, p, "request")
	waitJSWithin(t, p, 3*time.Minute, `document.getElementById('batch').dataset.done === 'true' &&
		[...document.querySelectorAll('#batch-jobs li')].length === `+fmt.Sprint(n)+` &&
		[...document.querySelectorAll('#batch-jobs li')].every(li => li.dataset.state === 'succeeded')`,
		"the hundred jobs reach succeeded on the page")
	require.Len(t, net.matching(batchSubmits), 1, "one click, one request for the hundred\n%s", net)
	require.Empty(t, net.matching(submits), "no job was requested alone")
	require.Len(t, net.matching(requesterStreams), 1, "one connection watched them all")
	require.Empty(t, net.matching(func(r sentRequest) bool { return jobStream.MatchString(r.path) }), "no per-job or per-batch stream")
	require.Len(t, sys.listJobs(t, tok), n, "one job per revision")

	// One mail for the batch, listing every job; none per job.
	outbox := filepath.Join(sys.dataDir, "outbox")
	var mails []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		mails, _ = filepath.Glob(filepath.Join(outbox, "*.eml"))
		if len(mails) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Len(t, mails, 1, "one mail for the batch")
	body, err := os.ReadFile(mails[0])
	require.NoError(t, err)
	for _, j := range sys.listJobs(t, tok) {
		require.Contains(t, string(body), j.ID, "the mail lists every job")
	}
	// A per-job mail would come as its job ends; every job ended before
	// the batch's mail was written, so none is still on its way.
	require.Never(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(outbox, "*.eml"))
		return len(m) > 1
	}, 2*time.Second, 100*time.Millisecond, "no mail per job")
}
