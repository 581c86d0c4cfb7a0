package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/stretchr/testify/require"
)

// The console's types view shows an endpoint type as an operator needs
// it: where its jobs go (the URL's scheme and host, never its path), how
// old its signing secret is, and its last failed job's error (hostile
// markup shown as text, the job linked); a worker's type shows none of it.
func TestConsoleShowsEndpointTypes(t *testing.T) {
	sys := startSystem(t, false)
	op := sys.mintRole(t, auth.Identity{Operator: true, Requester: "ops-1"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": 422, "detail": hostileError})
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	host := "http://" + ln.Addr().String()

	body, err := json.Marshal(map[string]any{"schema": consoleSchema, "content_type": "text/plain",
		"endpoint": map[string]any{"url": host + "/hooks/thumbnail?token=hunter2"}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, sys.url+"/v1/admin/types/thumbnail", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+op)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", data)

	id := sys.submitWhenDeclared(t, sys.token(t, "4", "reviewer-47"), "thumb-1", `{"type":"thumbnail","params":{"n":1}}`)
	require.Eventually(t, func() bool { return sys.adminGet(t, op, "/v1/admin/jobs/"+id)["state"] == "failed" },
		30*time.Second, 50*time.Millisecond)
	listed := sys.adminGet(t, op, "/v1/admin/types")
	require.Contains(t, mustJSON(t, listed), `"secret_since"`)

	p := openBrowser(t)
	p.net = recordNetwork(t, p, sys.url)
	consoleSignIn(t, p, sys.url, op)
	require.NoError(t, chromedp.Do(p.ctx, chromedp.WaitVisible(chromedp.ID("view-jobs")), chromedp.Click(chromedp.ID("nav-types"))))
	row := `document.querySelector('#types-body tr[data-type=thumbnail]')`
	waitJS(t, p, row+`?.querySelector('[data-k=last-error] a') != null`, "the endpoint type's last error")
	require.Equal(t, "true", evalJS[string](t, p, row+`.dataset.endpoint`))
	shown := evalJS[string](t, p, row+`.querySelector('[data-k=endpoint]').textContent`)
	require.Equal(t, host+"/…", shown, "the scheme and host only")
	require.NotContains(t, shown, "hunter2")
	age := evalJS[string](t, p, row+`.querySelector('[data-k=secret-age]').textContent`)
	require.Regexp(t, `^(\d+ s|\d+ min \d+ s|—)$`, age)
	require.NotEqual(t, "—", age, "the secret's age is shown")
	last := evalJS[string](t, p, row+`.querySelector('[data-k=last-error]').textContent`)
	require.True(t, strings.HasPrefix(last, id+" endpoint_rejected: render broke: <img"), last)
	require.False(t, evalJS[bool](t, p, `!!window.__xss`), "the handler's detail is text, never markup")
	require.Equal(t, "#"+`view=job&id=`+id, evalJS[string](t, p, row+`.querySelector('[data-k=last-error] a').getAttribute('href')`))
	// permit_report runs on a worker: no endpoint, no secret, no last error.
	permit := `document.querySelector('#types-body tr[data-type=permit_report]')`
	waitJS(t, p, permit+` != null`, "the worker's type")
	require.Equal(t, "false", evalJS[string](t, p, permit+`.dataset.endpoint`))
	require.Equal(t, "—", evalJS[string](t, p, permit+`.querySelector('[data-k=last-error]').textContent`))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}
