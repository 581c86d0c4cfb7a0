package broker

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/tracing"
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
