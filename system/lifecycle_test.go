package system_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/system"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// Ending the ctx given to Start once it returned stops nothing: a job
// submitted afterwards is admitted, relayed by the dispatcher, rendered and
// succeeds.
func TestEndingTheStartContextStopsNothing(t *testing.T) {
	t.Parallel()
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr = t.TempDir(), "127.0.0.1:0"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: &syncBuffer{}})
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.Stop(context.Background())) }()
	cancel()

	runOneReport(t, sys, "after-the-start-ctx-ended", 2, 30*time.Second, "a component stopped with the start context")
}

// stuck is a worker whose Stop drains until its ctx ends.
type stuck struct{}

func (stuck) Start(context.Context) error { return nil }
func (stuck) Stop(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// A Stop whose deadline passes returns about then, with an error naming
// the component that was cut off; the stages after it still stop, each
// within its share of what is left.
func TestStopKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr = t.TempDir(), "127.0.0.1:0"
	logs := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: logs,
		Workers: []system.WorkerFunc{func(*system.System, *nats.Conn) (system.Service, error) { return stuck{}, nil }}})
	require.NoError(t, err)

	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer scancel()
	began := time.Now()
	err = sys.Stop(sctx)
	took := time.Since(began)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "worker-1")
	require.Less(t, took, 5*time.Second, "Stop outlived its deadline")
	out := logs.String()
	require.Contains(t, out, `msg="dispatcher stopped"`, "the dispatcher stopped after the cut-off worker")
	require.Contains(t, out, `msg="notifier stopped"`)
	require.ErrorIs(t, sys.Stop(context.Background()), context.DeadlineExceeded, "a second Stop returns the first's result")
}

// runOneReport submits a permit_report of pages pages under key as tenant
// 4's requester r, expects 202, and long-polls until it succeeded, failing
// with why when it has not within timeout.
func runOneReport(t *testing.T, sys *system.System, key string, pages int, timeout time.Duration, why string) {
	t.Helper()
	tok, err := sys.Token(auth.Identity{Tenant: "4", Requester: "r"}, time.Hour)
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, sys.URL()+"/v1/jobs",
		strings.NewReader(fmt.Sprintf(`{"type":"permit_report","params":{"case_id":1,"revision":1,"pages":%d}}`, pages)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var j struct{ ID, State string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&j))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	deadline := time.Now().Add(timeout)
	for j.State != "succeeded" {
		require.True(t, time.Now().Before(deadline), "the job is still %s: %s", j.State, why)
		req, _ := http.NewRequest(http.MethodGet, sys.URL()+"/v1/jobs/"+j.ID+"?wait=5s", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&j))
		resp.Body.Close()
	}
}
