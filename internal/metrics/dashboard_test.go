package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
)

// dashboardFamilies are the series docs/grafana-dashboard.json may use:
// the per-type ones, the workers', the storage's and the notices', each with
// its labels.
var dashboardFamilies = map[string][]string{
	"jobgate_attempts_total":           {"type", "outcome"},
	"jobgate_attempt_duration_seconds": {"type", "outcome", "le"},
	"jobgate_jobs":                     {"type", "state"},
	"jobgate_oldest_queued_seconds":    {"type", "tenant"},
	"jobgate_workers":                  {"type"},
	"jobgate_worker_slots":             {"type"},
	"jobgate_worker_busy_slots":        {"type"},
	"jobgate_type_paused":              {"type"},
	"jobgate_storage_bytes":            {"resource"},
	"jobgate_storage_budget_bytes":     {"resource"},
	"jobgate_http_storage_full_total":  {"route"},
	"jobgate_http_rate_limited_total":  {"route"},
	"jobgate_deliveries_pending":       {"tenant", "destination", "channel"},
	"jobgate_deliveries_total":         {"channel", "outcome"},
}

// dashboardExprs are the PromQL expressions of the dashboard's panels and
// variables, named by where they are, with Grafana's variables replaced by
// what they stand for (All is .+).
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "grafana-dashboard.json"))
	require.NoError(t, err)
	var d struct {
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(data, &d))
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$type", ".+")
	out := map[string]string{}
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out[fmt.Sprintf("panel_%d_%s", p.ID, tg.RefID)] = grafana.Replace(tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\((\w+), *(\w+)\)$`)
	for _, v := range d.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			out["variable_"+v.Name] = fmt.Sprintf("count by (%s) (%s)", m[2], m[1])
		}
	}
	return out
}

type dashPanel struct {
	ID      int         `json:"id"`
	Panels  []dashPanel `json:"panels"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// The dashboard uses only the series above (per type, workers, storage,
// notices), every one of them, with their own labels; promtool accepts its expressions as recording rules
// and the exposition of those series.
func TestTheDashboardUsesOnlyThePerTypeSeries(t *testing.T) {
	t.Parallel()
	exprs := dashboardExprs(t)
	require.GreaterOrEqual(t, len(exprs), 8)
	names := regexp.MustCompile(`\bjobgate_[a-z_]+`)
	grouping := regexp.MustCompile(`\bby \(([^)]*)\)`)
	used := map[string]bool{}
	for where, e := range exprs {
		for _, n := range names.FindAllString(e, -1) {
			family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
			labels, ok := dashboardFamilies[family]
			require.True(t, ok, "%s uses %s, not a series of dashboardFamilies", where, n)
			used[family] = true
			for _, g := range grouping.FindAllStringSubmatch(e, -1) {
				for _, l := range strings.Split(g[1], ",") {
					require.Contains(t, labels, strings.TrimSpace(l), "%s groups %s by a label it lacks", where, family)
				}
			}
		}
	}
	require.Len(t, used, len(dashboardFamilies), "every series of dashboardFamilies is on the dashboard")

	// The series as a registry exposes them.
	m := New()
	m.Attempt("sales_export", "retry", 3*time.Second)
	m.Attempt("sales_export", "succeeded", 90*time.Second)
	now := time.Now()
	require.NoError(t, m.ObserveTypes(func() []TypeQueue {
		return []TypeQueue{{Type: "sales_export", Queued: 1, Oldest: map[string]time.Time{"4": now.Add(-time.Minute)}}}
	}, func() time.Time { return now }))
	require.NoError(t, m.ObserveTypeWorkers(func() []TypeWorkers {
		return []TypeWorkers{{Type: "sales_export", Workers: 2, Slots: 8, Busy: 3}}
	}))
	m.StorageBytes.WithLabelValues("KV_JOBGATE_JOBS").Set(1 << 20)
	m.StorageBudget.WithLabelValues("KV_JOBGATE_JOBS").Set(2 << 30)
	h, err := m.NewHTTP()
	require.NoError(t, err)
	h.Request("/v1/jobs", "POST", 507, time.Millisecond)
	h.Request("/v1/jobs/:id", "GET", 429, time.Millisecond)
	d := NewDeliveries()
	m.RegisterDeliveries(d)
	d.Counter("webhook", "delivered").Inc()
	m.ObservePendingDeliveries(func() []PendingDeliveries {
		return []PendingDeliveries{{Tenant: "4", Destination: "wh-1", Channel: "webhook", Count: 3}}
	})
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	exposition := rec.Body
	for family := range dashboardFamilies {
		require.Contains(t, exposition.String(), "# TYPE "+family+" ")
	}

	promtool := findPromtool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition.Bytes())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
	require.Empty(t, bytes.TrimSpace(out), "promtool found problems:\n%s", out)

	check := func(exprs map[string]string) ([]byte, error) {
		keys := make([]string, 0, len(exprs))
		for k := range exprs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var rules []map[string]string
		for _, k := range keys {
			rules = append(rules, map[string]string{"record": "jobgate:dashboard:" + k, "expr": exprs[k]})
		}
		data, err := json.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "dashboard.rules.yml") // JSON is YAML
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return exec.CommandContext(ctx, promtool, "check", "rules", path).CombinedOutput()
	}
	out, err = check(exprs)
	require.NoError(t, err, "promtool check rules:\n%s", out)
	require.Contains(t, string(out), fmt.Sprintf("%d rules found", len(exprs)))

	// The check can fail: a broken expression is refused.
	_, err = check(map[string]string{"broken": `sum by (type) (rate(jobgate_attempts_total[5m])`})
	require.Error(t, err)
}

// findPromtool looks on PATH, then in the repository's bin/ (where
// scripts/ensure-interop.sh puts it); without it the test skips, except
// under CI=true.
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
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true and promtool is missing; scripts/ensure-interop.sh installs it")
	}
	t.Skip("promtool is not installed (Debian: apt-get install prometheus); `make test` installs it")
	return ""
}
