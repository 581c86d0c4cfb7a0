package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/test/jobtest"
)

// A line about a job outside its attempt's span names the job's trace.
func TestJobLinesOutsideTheAttemptNameTheJobsTrace(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil)))
	rec := &job.Record{ID: "job_1", Trace: "00-9bf92f3577b34da6a3ce929d0e0e4736-50f067aa0ba902b7-01"}
	log.InfoContext(jobCtx(context.Background(), rec), "job failed, attempts used up", "job_id", rec.ID)
	require.Contains(t, buf.String(), `"trace_id":"9bf92f3577b34da6a3ce929d0e0e4736"`)
	require.Contains(t, buf.String(), `"span_id":"50f067aa0ba902b7"`)
	buf.Reset()
	log.InfoContext(jobCtx(context.Background(), &job.Record{ID: "job_2"}), "untraced")
	require.NotContains(t, buf.String(), "trace_id")
}

// At info an attempt is one line, its outcome, and that line names the
// worker: a claim is logged at debug, since a deployment running thousands
// of jobs a second would otherwise log twice as much for no more news.
func TestAnAttemptIsOneLineAtInfoNamingItsWorker(t *testing.T) {
	t.Parallel()
	var logs jobtest.SyncBuffer
	tb := &testBundle{env: jobtest.Start(t), log: slog.New(slog.NewJSONHandler(&logs, nil))}
	tb.conn = tb.env.Connect(t, "test")
	tb.broker(t, true)
	require.Nil(t, tb.declare(t, credA, "logged", "text/plain").Error)
	rec := tb.admit(t, "logged", "logged-1")
	a := tb.next(t, credA, "logged", "worker-a")
	r := tb.ask(t, credA, "logged", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}})
	require.Nil(t, r.Error)

	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		if line["job_id"] == rec.ID {
			lines = append(lines, line)
		}
	}
	require.Len(t, lines, 1, "one line at info for the attempt: %v", lines)
	require.Equal(t, "job succeeded", lines[0]["msg"])
	require.Equal(t, "worker-a", lines[0]["worker"])
}
