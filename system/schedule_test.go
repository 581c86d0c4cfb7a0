package system_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/system"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A job scheduled through the API survives a restart of the whole
// deployment (serve stopped and started again on its data dir): it is
// neither lost nor started early, and is queued within 2 s of its run_at.
func TestAScheduledJobSurvivesARestart(t *testing.T) {
	t.Parallel()
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr = t.TempDir(), "127.0.0.1:0"
	start := func() *system.System {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: io.Discard,
			Components: []system.Component{system.Dispatcher, system.Gateway},
			Workers:    []system.WorkerFunc{system.Declare(jobtest.PermitReport())}})
		require.NoError(t, err)
		return sys
	}
	sys := start()
	tok, err := sys.Token(auth.Identity{Tenant: "4", Requester: "r"}, time.Hour)
	require.NoError(t, err)
	call := func(sys *system.System, method, path, body string) (int, job.Resource) {
		req, _ := http.NewRequest(method, sys.URL()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", "restart-1")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var res job.Resource
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
		return resp.StatusCode, res
	}
	status, res := call(sys, http.MethodPost, "/v1/jobs", `{"type":"permit_report","params":{"case_id":47,"revision":29},"delay":"4s"}`)
	require.Equal(t, http.StatusAccepted, status)
	require.Equal(t, job.StateScheduled, res.State)
	runAt := *res.RunAt
	// Wait until the relay stored its entry, then stop everything.
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := sys.Resources().Schedule.Depth(ctx)
		return err == nil && n == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, sys.Stop(context.Background()))

	sys = start()
	defer func() { require.NoError(t, sys.Stop(context.Background())) }()
	key := job.StoreKey("4", "r", res.ID)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := sys.Resources().Jobs.Get(ctx, key)
		cancel()
		require.NoError(t, err, "the job is still there after the restart")
		if got.State != job.StateScheduled {
			require.Equal(t, job.StateQueued, got.State)
			require.False(t, got.UpdatedAt.Before(runAt), "queued %s before its run_at", runAt.Sub(got.UpdatedAt))
			require.Less(t, got.UpdatedAt.Sub(runAt), 2*time.Second, "queued within 2 s of its run_at")
			break
		}
		require.Less(t, time.Since(runAt), 10*time.Second, "never queued after the restart")
		time.Sleep(20 * time.Millisecond)
	}
	status, got := call(sys, http.MethodGet, "/v1/jobs/"+res.ID, "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, runAt, *got.RunAt)
}
