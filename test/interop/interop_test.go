package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

const permit = `{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":3}}`

// Every webhook delivery verifies with the official Standard Webhooks
// library, the retried one (same webhook-id) included; a tampered copy
// does not.
func TestStandardWebhooksVerifyEveryDelivery(t *testing.T) {
	t.Parallel()
	dir := nodeDir(t, "standardwebhooks")
	sys := startSystem(t, false)
	tok := sys.token(t, "4", "reviewer-47")
	r := sys.submit(t, tok, "hooks", permit)
	require.Equal(t, job.StateSucceeded, sys.waitTerminal(t, tok, r.ID).State)

	// Wait for the terminal event's delivery to be accepted.
	var got []delivery
	require.Eventually(t, func() bool {
		got = sys.hooks.deliveries()
		for _, d := range got {
			var p struct {
				Type string       `json:"type"`
				Data job.Resource `json:"data"`
			}
			if json.Unmarshal([]byte(d.Body), &p) == nil && p.Type == "job.succeeded" && p.Data.State == job.StateSucceeded && d.status < 300 {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the succeeded event was never delivered")
	require.Equal(t, http.StatusServiceUnavailable, got[0].status, "the first delivery was refused, to make a retry")
	perID := map[string]int{}
	for _, d := range got {
		perID[d.Headers["webhook-id"]]++
	}
	require.GreaterOrEqual(t, perID[got[0].Headers["webhook-id"]], 2, "the refused delivery was retried with the same webhook-id")

	tampered := got[len(got)-1]
	tampered.Body = string(bytes.Replace([]byte(tampered.Body), []byte(r.ID), []byte("job_forged"), 1))
	in, err := json.Marshal(map[string]any{"secret": webhookSecret, "deliveries": append(got, tampered)})
	require.NoError(t, err)
	results := runNode(t, dir, 30*time.Second, in, "webhook-verify.mjs")
	require.Len(t, results, len(got)+1)
	for i, d := range got {
		require.Equal(t, true, results[i]["ok"], "delivery %d (webhook-id %s, HTTP %d) did not verify: %v", i, d.Headers["webhook-id"], d.status, results[i]["error"])
		require.Equal(t, r.ID, results[i]["job"])
		require.Equal(t, d.Headers["webhook-id"], results[i]["id"])
	}
	require.Equal(t, false, results[len(got)]["ok"], "a tampered body must not verify: the check can fail")
}

// The npm eventsource package follows a job to its end and then stops: its
// reconnect after the terminal event carries that event's id, is answered
// 204, and no further request comes.
func TestEventSourceStopsAfterTheEnd(t *testing.T) {
	t.Parallel()
	dir := nodeDir(t, "eventsource")
	sys := startSystem(t, true)
	tok := sys.token(t, "4", "reviewer-47")
	r := sys.submit(t, tok, "sse", permit)
	// The render waits until the client's stream is open, so the client
	// sees the job change, not only its end.
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if reqs := sys.proxy.streamRequests(); len(reqs) > 0 && reqs[0].status == http.StatusOK {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		sys.release()
	}()

	lines := runNode(t, dir, 60*time.Second, nil, "sse-follow.mjs", sys.url+"/v1/jobs/"+r.ID+"/events", tok, "45000")
	var (
		states []string
		ids    []int
		errs   []map[string]any
	)
	for _, l := range lines {
		switch l["kind"] {
		case "job":
			states = append(states, l["state"].(string))
			id, err := strconv.Atoi(l["id"].(string))
			require.NoError(t, err, "event ids are revisions")
			ids = append(ids, id)
		case "error":
			errs = append(errs, l)
		case "problem":
			t.Fatalf("the stream sent a problem: %v", l)
		}
	}
	t.Logf("eventsource saw %v (ids %v), then %v", states, ids, errs)
	require.GreaterOrEqual(t, len(states), 3, "it followed the job through its changes")
	require.Contains(t, []string{"queued", "running"}, states[0])
	require.Equal(t, "succeeded", states[len(states)-1], "followed to the end")
	for i := 1; i < len(ids); i++ {
		require.Greater(t, ids[i], ids[i-1], "event ids increase: no event twice")
	}
	last := lines[len(lines)-1]
	require.Equal(t, "done", last["kind"])
	require.EqualValues(t, 2, last["readyState"], "the client closed itself (CLOSED) before the deadline")
	require.NotEmpty(t, errs)
	require.EqualValues(t, 204, errs[len(errs)-1]["code"], "it stopped because of the 204")

	reqs := sys.proxy.streamRequests()
	require.Len(t, reqs, 2, "one stream and one reconnect: %+v", reqs)
	require.Equal(t, http.StatusOK, reqs[0].status)
	require.Empty(t, reqs[0].lastEventID)
	require.Equal(t, http.StatusNoContent, reqs[1].status)
	require.Equal(t, strconv.Itoa(ids[len(ids)-1]), reqs[1].lastEventID, "the reconnect names the terminal event")
	// Nothing after the 204; EventSource's own retry delay is 3 s, so a
	// client that had not stopped would be back within this window.
	require.Never(t, func() bool { return len(sys.proxy.streamRequests()) > 2 }, 4*time.Second, 50*time.Millisecond,
		"the client reconnected after the 204")
}

// Redocly's recommended ruleset passes on the document the gateway serves
// (an accepted finding is listed with its reason in node/.redocly.lint-ignore.yaml).
func TestOpenAPILintsClean(t *testing.T) {
	t.Parallel()
	dir := nodeDir(t, "@redocly/cli")
	sys := startSystem(t, false)
	status, served := sys.call(t, http.MethodGet, "/openapi.yaml", "", "")
	require.Equal(t, http.StatusOK, status)
	file, err := os.ReadFile(filepath.Join("..", "..", "gateway", "openapi.yaml"))
	require.NoError(t, err)
	require.Equal(t, string(file), string(served), "the gateway serves the checked-in document")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "redocly"),
		"lint", "--config", "redocly.yaml", "--format", "stylish", filepath.Join("..", "..", "..", "gateway", "openapi.yaml"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "redocly lint:\n%s", out)
	require.Contains(t, string(out), "Your API description is valid")
	require.NotContains(t, string(out), "warning", "warnings count too:\n%s", out)
}

// promtool (Prometheus's own checker) accepts /metrics after some traffic:
// while a job runs (the per-type gauges) and once it ended (the per-type
// attempt counts and durations).
func TestPromtoolChecksMetrics(t *testing.T) {
	t.Parallel()
	promtool := findPromtool(t)
	sys := startSystem(t, true)
	tok := sys.token(t, "4", "reviewer-47")
	r := sys.submit(t, tok, "metrics", permit)
	scrape := func() string {
		status, body := sys.call(t, http.MethodGet, "/metrics", "", "")
		require.Equal(t, http.StatusOK, status)
		return string(body)
	}
	var running string
	require.Eventually(t, func() bool {
		running = scrape()
		return strings.Contains(running, `jobgate_jobs{state="running",type="permit_report"} 1`)
	}, 20*time.Second, 50*time.Millisecond, "the held render shows as running")
	sys.release()
	sys.waitTerminal(t, tok, r.ID)
	var body string
	require.Eventually(t, func() bool {
		body = scrape()
		return strings.Contains(body, `jobgate_attempts_total{outcome="succeeded",type="permit_report"} 1`)
	}, 20*time.Second, 50*time.Millisecond)
	require.Contains(t, body, "jobgate_admissions_total")
	require.Contains(t, body, `jobgate_attempt_duration_seconds_count{outcome="succeeded",type="permit_report"} 1`)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, exposition := range []string{running, body} {
		cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(exposition)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool check metrics:\n%s", out)
		require.Empty(t, bytes.TrimSpace(out), "promtool found problems:\n%s", out)
	}

	// The check can fail: a broken exposition is refused.
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body + "jobgate_broken{le=\"x\" 1\n")
	_, err := cmd.CombinedOutput()
	require.Error(t, err)
}

// findPromtool looks on PATH, then in the repository's bin/ (where
// scripts/ensure-interop.sh puts it when it cannot install Debian's package).
func findPromtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if p, err := filepath.Abs(filepath.Join("..", "..", "bin", "promtool")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	missing(t, "promtool is not installed (Debian: apt-get install prometheus)")
	return ""
}
