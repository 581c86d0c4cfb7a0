package system_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/system"
	"github.com/stretchr/testify/require"
)

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// A dispatcher (a process without the gateway) with ops_addr answers the
// probes an orchestrator sends and the scraper's /metrics, guarded by the
// metrics token like the gateway's: its per-type gauges and attempt counts
// are nowhere else.
func TestAProcessWithoutTheGatewayServesProbesAndMetricsOnOpsAddr(t *testing.T) {
	t.Parallel()
	settings := config.Default()
	settings.DataDir, settings.OpsAddr, settings.MetricsToken = t.TempDir(), "127.0.0.1:0", "scrape-7d"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: io.Discard,
		Components: []system.Component{system.Dispatcher}})
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			require.NoError(t, sys.Stop(context.Background()))
		}
	}()
	url := sys.OpsURL()
	require.NotEmpty(t, url)
	require.Empty(t, sys.URL(), "no gateway")

	status, body := get(t, url+"/healthz", "")
	require.Equal(t, http.StatusOK, status, body)
	status, body = get(t, url+"/readyz", "")
	require.Equal(t, http.StatusOK, status, body)
	status, _ = get(t, url+"/metrics", "")
	require.Equal(t, http.StatusUnauthorized, status, "the metrics token guards it")
	status, body = get(t, url+"/metrics", "scrape-7d")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "jobgate_relay_backlog ", "the dispatcher's own series")

	require.NoError(t, sys.Stop(context.Background()))
	stopped = true
	_, err = net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second)
	require.Error(t, err, "the ops listener is closed with the process")
}

// A taken ops_addr fails the start at once, naming the setting.
func TestATakenOpsAddrIsNamed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	settings := config.Default()
	settings.DataDir, settings.OpsAddr = t.TempDir(), ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = system.Start(ctx, system.Config{Settings: &settings, LogOutput: io.Discard,
		Components: []system.Component{system.Notifier}})
	require.ErrorContains(t, err, "JOBGATE_OPS_ADDR")
}
