package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultsAreValid(t *testing.T) {
	t.Parallel()
	c := Default()
	require.NoError(t, c.Validate())
	require.Equal(t, "127.0.0.1:8080", c.HTTPAddr)
	require.Equal(t, 720*time.Hour, c.JobTTL)
	require.Equal(t, 5*time.Minute, c.ResultLinkTTL)
	require.True(t, c.Embedded())
}

func TestFileThenEnv(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobgate.yaml")
	require.NoError(t, os.WriteFile(path, []byte("http_addr: 127.0.0.1:9000\njob_ttl: 48h\nmax_attempts: 5\nnats:\n  replicas: 3\n"), 0o600))
	c := Default()
	require.NoError(t, c.LoadFile(path))
	require.Equal(t, "127.0.0.1:9000", c.HTTPAddr)
	require.Equal(t, 48*time.Hour, c.JobTTL)
	require.Equal(t, 3, c.NATS.Replicas)
	env := map[string]string{"JOBGATE_JOB_TTL": "24h", "JOBGATE_NATS_URL": "nats://a:4222,nats://b:4222", "JOBGATE_MAX_ATTEMPTS": "2"}
	require.NoError(t, c.LoadEnv(func(k string) string { return env[k] }))
	require.Equal(t, 24*time.Hour, c.JobTTL, "env overrides the file")
	require.Equal(t, 2, c.MaxAttempts)
	require.False(t, c.Embedded())
	require.NoError(t, c.Validate())
}

func TestBadSettingsAreNamed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(path, []byte("job_tll: 1h\n"), 0o600))
	c := Default()
	require.ErrorContains(t, c.LoadFile(path), "job_tll", "a typo is an error, not a silent default")

	c = Default()
	require.ErrorContains(t, c.LoadEnv(func(k string) string {
		if k == "JOBGATE_RENDER_TIMEOUT" {
			return "soon"
		}
		return ""
	}), "JOBGATE_RENDER_TIMEOUT")

	c = Default()
	c.MaxAttempts = 0
	c.LogFormat = "xml"
	err := c.Validate()
	require.ErrorContains(t, err, "max_attempts")
	require.ErrorContains(t, err, "log_format")
}

func TestExampleConfigLoads(t *testing.T) {
	t.Parallel()
	c := Default()
	require.NoError(t, c.LoadFile("../../configs/jobgate.yaml"))
	require.NoError(t, c.Validate())
}

func TestRendererTenantSharesFromYAML(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobgate.yaml")
	require.NoError(t, os.WriteFile(path, []byte("renderer:\n  tenant_weights: {acme: 3}\n  tenant_max_running: 2\n  tenant_max_running_for: {beta: 1}\n"), 0o600))
	c := Default()
	require.NoError(t, c.LoadFile(path))
	require.NoError(t, c.Validate())
	require.Equal(t, map[string]int{"acme": 3}, c.Renderer.TenantWeights)
	require.Equal(t, 2, c.Renderer.TenantMaxRunning)
	require.Equal(t, map[string]int{"beta": 1}, c.Renderer.TenantMaxRunningFor)
	c.Renderer.TenantWeights["acme"] = 0
	require.ErrorContains(t, c.Validate(), "renderer.tenant_weights[acme]")
}

// The token audience and issuer are settings like any other: empty by
// default (not checked), set from the file or the environment.
func TestAuthAudienceAndIssuer(t *testing.T) {
	t.Parallel()
	c := Default()
	require.Empty(t, c.AuthAudience)
	require.Empty(t, c.AuthIssuer)
	path := filepath.Join(t.TempDir(), "jobgate.yaml")
	require.NoError(t, os.WriteFile(path, []byte("auth_audience: from-file\nauth_issuer: https://login.example.com\n"), 0o600))
	require.NoError(t, c.LoadFile(path))
	require.Equal(t, "from-file", c.AuthAudience)
	require.Equal(t, "https://login.example.com", c.AuthIssuer)
	env := map[string]string{"JOBGATE_AUTH_AUDIENCE": "jobgate-api", "JOBGATE_AUTH_ISSUER": "https://sso.example.com"}
	require.NoError(t, c.LoadEnv(func(k string) string { return env[k] }))
	require.Equal(t, "jobgate-api", c.AuthAudience)
	require.Equal(t, "https://sso.example.com", c.AuthIssuer)
	require.NoError(t, c.Validate())
}

func TestMetricsToken(t *testing.T) {
	t.Parallel()
	c := Default()
	require.Empty(t, c.MetricsToken, "open by default, on the default loopback address")
	require.NoError(t, c.LoadEnv(func(k string) string {
		if k == "JOBGATE_METRICS_TOKEN" {
			return "scrape-me"
		}
		return ""
	}))
	require.Equal(t, "scrape-me", c.MetricsToken)
}

// The tenant result quota has a working default, is read from the file and
// the environment, and refuses what bounds nothing sensible.
func TestTenantResultQuota(t *testing.T) {
	t.Parallel()
	c := Default()
	require.EqualValues(t, 2<<30, c.TenantResultsMaxBytes, "a quarter of the 8 GiB results budget")
	path := filepath.Join(t.TempDir(), "jobgate.yaml")
	require.NoError(t, os.WriteFile(path, []byte("tenant_results_max_bytes: 1073741824\n"), 0o600))
	require.NoError(t, c.LoadFile(path))
	require.EqualValues(t, 1<<30, c.TenantResultsMaxBytes)
	env := map[string]string{"JOBGATE_TENANT_RESULTS_MAX_BYTES": "536870912"}
	require.NoError(t, c.LoadEnv(func(k string) string { return env[k] }))
	require.EqualValues(t, 512<<20, c.TenantResultsMaxBytes)
	require.NoError(t, c.Validate())
	for _, bad := range []int64{0, -1, 1<<20 - 1} {
		c.TenantResultsMaxBytes = bad
		require.ErrorContains(t, c.Validate(), "tenant_results_max_bytes", "%d is no quota (0 is not unlimited)", bad)
	}
}

func TestPublicURL(t *testing.T) {
	t.Parallel()
	c := Default()
	c.PublicURL = "https://jobs.example.com"
	require.NoError(t, c.Validate())
	for _, bad := range []string{"jobs.example.com", "ftp://jobs.example.com", "https://"} {
		c.PublicURL = bad
		err := c.Validate()
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "JOBGATE_PUBLIC_URL")
	}
}

// The NATS TLS files and the ops listener come from the environment as
// well (the Helm chart and the Compose file set nothing else); a bad ops
// address is named.
func TestNATSTLSAndOpsAddrFromEnv(t *testing.T) {
	t.Parallel()
	c := Default()
	env := map[string]string{"JOBGATE_NATS_TLS_CA": "/tls/ca.crt", "JOBGATE_NATS_TLS_CERT": "/tls/c.crt", "JOBGATE_NATS_TLS_KEY": "/tls/c.key",
		"JOBGATE_OPS_ADDR": "0.0.0.0:9090"}
	require.NoError(t, c.LoadEnv(func(k string) string { return env[k] }))
	require.Equal(t, NATS{Replicas: 1, SyncAlways: true, TLSCA: "/tls/ca.crt", TLSCert: "/tls/c.crt", TLSKey: "/tls/c.key"}, c.NATS)
	require.Equal(t, "0.0.0.0:9090", c.OpsAddr)
	require.NoError(t, c.Validate())
	c.OpsAddr = "9090"
	require.ErrorContains(t, c.Validate(), "JOBGATE_OPS_ADDR")
}

// The embedded server fsyncs every write before it acknowledges it unless
// told otherwise: a 202 then survives the machine's power loss
// (docs/reliability.md, "What a 202 survives").
func TestSyncAlwaysIsTheDefault(t *testing.T) {
	t.Parallel()
	require.True(t, Default().NATS.SyncAlways)
	c := Default()
	require.NoError(t, c.LoadEnv(func(k string) string {
		return map[string]string{"JOBGATE_NATS_SYNC_ALWAYS": "false"}[k]
	}))
	require.False(t, c.NATS.SyncAlways)
}
