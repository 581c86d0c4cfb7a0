package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cdpage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/stretchr/testify/require"
)

type noteParams struct {
	Text string `json:"text"`
}

// A user's type carries free text; whatever a requester puts there reaches
// the page as text and never runs: the page assigns it with textContent.
func TestHostileParamsShowAsTextAndRunNothing(t *testing.T) {
	sys := startSystem(t, false)
	w, err := worker.New(worker.Config{Conn: sys.res.JS.Conn()})
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[noteParams]{Name: "note", ContentType: "text/plain",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["text"],
		  "properties":{"text":{"type":"string","maxLength":200}}}`),
		Work: func(_ context.Context, j *worker.Job[noteParams]) error {
			_, err := j.Output().Write([]byte(j.Params.Text))
			return err
		}}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })

	hostile := `<img src=x onerror=alert(1)><img src=y onerror="window.__xss=1"><script>window.__xss=2</script>`
	body, err := json.Marshal(map[string]any{"type": "note", "params": map[string]string{"text": hostile}})
	require.NoError(t, err)
	tok := sys.token(t, "4", "reviewer-47")
	var id string
	require.Eventually(t, func() bool { // the gateway accepts the type once the worker declared it
		req, _ := http.NewRequest(http.MethodPost, sys.url+"/v1/jobs", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "hostile-1")
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

	p := openBrowser(t)
	var dialogs atomic.Int32
	require.NoError(t, chromedp.Listen(p.ctx, func(ev any) {
		if _, ok := ev.(*cdpage.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
		}
	}))
	require.NoError(t, chromedp.Do(p.ctx,
		chromedp.Navigate(sys.url+"/#job="+id),
		chromedp.WaitVisible(chromedp.ID("token-form")),
		chromedp.SetValue(chromedp.ID("token"), tok),
		chromedp.Click(chromedp.CSS("#token-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("request-form")),
	))
	viewShows(t, p, id, job.StateSucceeded)

	title := evalJS[string](t, p, `document.getElementById('job-title').textContent`)
	require.True(t, strings.Contains(title, hostile), "the params show verbatim: %q", title)
	list := evalJS[string](t, p, `document.body.innerText`)
	require.Contains(t, list, `<img src=x onerror=alert(1)>`, "the job list shows the text too")
	require.Zero(t, evalJS[int](t, p, `document.querySelectorAll('img[src=x], img[src=y], script:not([src])').length`),
		"no element was made of the params")
	require.True(t, evalJS[bool](t, p, `window.__xss === undefined`), "no handler of the params ran")
	require.Zero(t, dialogs.Load(), "no alert opened")
}
