package broker

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// logLines are the JSON log lines about job id, oldest first.
func logLines(t *testing.T, logs *jobtest.SyncBuffer, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		if line["job_id"] == id {
			out = append(out, line)
		}
	}
	return out
}

// A claim taken over from a worker that went silent is a warning naming
// the job, its type, tenant, the vanished worker and the attempt; a failed
// attempt's line names the tenant (issue 34).
func TestALostAttemptIsAWarningAndAFailureNamesItsTenant(t *testing.T) {
	t.Parallel()
	var logs jobtest.SyncBuffer
	tb := &testBundle{env: jobtest.Start(t), log: slog.New(slog.NewJSONHandler(&logs, nil))}
	tb.conn = tb.env.Connect(t, "test")
	tb.broker(t, true)
	require.Nil(t, tb.declare(t, credA, "lossy", "text/plain").Error)
	rec := tb.admit(t, "lossy", "lossy-1")
	tb.next(t, credA, "lossy", "worker-a")
	taken := tb.next(t, credA, "lossy", "worker-b") // worker-a went silent
	require.Equal(t, 2, taken.Attempt)

	var warn map[string]any
	for _, line := range logLines(t, &logs, rec.ID) {
		if line["level"] == "WARN" {
			warn = line
		}
	}
	require.NotNil(t, warn, "a warning for the lost attempt: %s", logs.String())
	require.Equal(t, "attempt lost: its worker went silent", warn["msg"])
	require.Equal(t, "lossy", warn["type"])
	require.Equal(t, rec.Tenant, warn["tenant"])
	require.Equal(t, "worker-a", warn["worker"])
	require.EqualValues(t, 1, warn["attempt"])

	r := tb.ask(t, credA, "lossy", wire.OpFail, wire.FailRequest{Held: wire.Held{Key: taken.Key, Token: taken.Token},
		Kind: wire.KindPermanent, Message: "no such region"})
	require.Nil(t, r.Error)
	var failed map[string]any
	for _, line := range logLines(t, &logs, rec.ID) {
		if line["msg"] == "attempt failed" {
			failed = line
		}
	}
	require.NotNil(t, failed, "the failure's line: %s", logs.String())
	require.Equal(t, rec.Tenant, failed["tenant"])
	require.Equal(t, "handler_error", failed["category"])
}
