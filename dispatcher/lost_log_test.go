package dispatcher

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A job whose worker vanished leaves a warning the operator can act on:
// which job, type, tenant, worker and attempt (issue 34).
func TestAVanishedWorkerIsAWarningNamingJobTypeTenantWorkerAttempt(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test")}
	var logs jobtest.SyncBuffer
	d, err := New(testConfig(), storesOf(env.Connect(t, "dispatcher-log").Res), slog.New(slog.NewJSONHandler(&logs, nil)))
	require.NoError(t, err)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() { _ = d.Stop(context.Background()) })

	rec := b.put(t, "vanished", running(1, "renderer-gone", time.Now().Add(-time.Hour)))
	jobtest.WaitFor(t, b.conn.Res, rec.Key(), 10*time.Second, func(r *job.Record) bool { return r.Worker == "" })
	var warn map[string]any
	require.Eventually(t, func() bool {
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["job_id"] == rec.ID && line["level"] == "WARN" {
				warn = line
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "a warning for the lost attempt: %s", &logs)
	require.Equal(t, "attempt lost: its worker went silent", warn["msg"])
	require.Equal(t, rec.Type, warn["type"])
	require.Equal(t, rec.Tenant, warn["tenant"])
	require.Equal(t, "renderer-gone", warn["worker"])
	require.EqualValues(t, 1, warn["attempt"])
}
