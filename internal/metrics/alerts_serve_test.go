package metrics_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/system"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func call(t *testing.T, method, url, token, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

// Every series the alert rules read is on a real serve's /metrics once it
// has seen the situations they watch: a paused type's queued job, an ended
// attempt, a 429, a webhook that does not answer. A rule reading a series
// jobgate does not export (a typo, a renamed metric) would never fire.
func TestEverySeriesTheAlertsReadIsOnARealServesMetrics(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prometheus", "alerts.yaml"))
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct{ Expr string }
		}
	}
	require.NoError(t, yaml.Unmarshal(data, &rules))
	families := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, n := range regexp.MustCompile(`\bjobgate_[a-z_]+`).FindAllString(r.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					n = strings.TrimSuffix(n, suffix)
				}
				families[n] = true
			}
		}
	}
	require.Greater(t, len(families), 10)

	settings := config.Default()
	settings.DataDir, settings.HTTPAddr = t.TempDir(), "127.0.0.1:0"
	settings.Gateway.ReadRate, settings.Gateway.ReadBurst = 0.01, 1
	settings.Notifier.AllowPrivateWebhooks = true
	settings.Notifier.Webhooks = map[string][]config.Webhook{"4": {{URL: "http://127.0.0.1:9/hook", Secret: "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtMzI="}}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: io.Discard})
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.Stop(context.Background())) }()
	op, err := sys.Token(auth.Identity{Requester: "ops", Operator: true}, time.Hour)
	require.NoError(t, err)
	user, err := sys.Token(auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour)
	require.NoError(t, err)

	// A paused type's job waits queued (the per-type job gauges and the
	// oldest queued age), then runs when resumed (an ended attempt); its
	// events go to a webhook that refuses the connection (the backlog).
	status, body := call(t, http.MethodPost, sys.URL()+"/v1/admin/types/permit_report/pause", op, "", "")
	require.Equal(t, http.StatusOK, status, body)
	status, body = call(t, http.MethodPost, sys.URL()+"/v1/jobs", user, "alerts-1",
		`{"type":"permit_report","params":{"case_id":1,"revision":1,"pages":1}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	id := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(body)[1]
	for range 2 { // a burst of 1: the second read is refused
		call(t, http.MethodGet, sys.URL()+"/v1/jobs/"+id, user, "", "")
	}
	scrape := func() string {
		resp, err := http.Get(sys.URL() + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(data)
	}
	// A family counts once any scrape showed it: the per-type job gauges
	// leave with the type's last open job.
	seen := map[string]bool{}
	missing := func(exposition string) []string {
		var out []string
		for f := range families {
			if regexp.MustCompile(`(?m)^` + f + `(\{| )`).MatchString(exposition) {
				seen[f] = true
			}
			if !seen[f] {
				out = append(out, f)
			}
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(strings.Join(missing(scrape()), " "), "jobgate_oldest_queued_seconds") {
		require.True(t, time.Now().Before(deadline), "the paused type's job is not on /metrics")
		time.Sleep(50 * time.Millisecond) // polling /metrics with a deadline
	}
	op2, err := sys.Token(auth.Identity{Requester: "ops-2", Operator: true}, time.Hour) // ops used its burst of 1
	require.NoError(t, err)
	status, body = call(t, http.MethodPost, sys.URL()+"/v1/admin/types/permit_report/resume", op2, "", "")
	require.Equal(t, http.StatusOK, status, body)
	var left []string
	for left = missing(scrape()); len(left) > 0; left = missing(scrape()) {
		require.True(t, time.Now().Before(deadline.Add(30*time.Second)), "series the alerts read that serve does not export: %v", left)
		time.Sleep(50 * time.Millisecond)
	}
}
