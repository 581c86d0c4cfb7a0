package gateway

import (
	"net/http"
	"testing"

	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/stretchr/testify/require"
)

// With a metrics token configured, /metrics (whose series name tenants)
// answers only a scraper that sends it as its bearer token; anyone else,
// a user's API token included, gets 401 unauthorized.
func TestMetricsTokenGuardsMetrics(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.Metrics = metrics.New(); c.MetricsToken = "scrape-3f9a1c" })
	tok := b.token(t, "4", "reviewer-47", false)
	b.submit(t, tok, "k", permit)

	for name, auth := range map[string]string{
		"none":            "",
		"user token":      "Bearer " + tok,
		"wrong token":     "Bearer scrape-3f9a1d",
		"prefix of it":    "Bearer scrape-3f9a1",
		"not bearer":      "Basic c2NyYXBlLTNmOWExYw==",
		"token, unmarked": "scrape-3f9a1c",
	} {
		var headers []string
		if auth != "" {
			headers = append(headers, "Authorization: "+auth)
		}
		r := b.do(t, http.MethodGet, "/metrics", "", "", headers...)
		require.Equal(t, http.StatusUnauthorized, r.status, name)
		require.Equal(t, "/problems/unauthorized", r.json(t)["type"], name)
		require.NotEmpty(t, r.header.Get("WWW-Authenticate"), name)
		require.NotContains(t, string(r.body), "jobgate_admissions_total", name)
	}
	r := b.do(t, http.MethodGet, "/metrics", "", "", "Authorization: Bearer scrape-3f9a1c")
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), `jobgate_admissions_total{outcome="new"} 1`)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", "", "").status, "health stays open")
}
