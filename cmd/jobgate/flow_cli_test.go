package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// submit --delay/--priority/--start-by admits a scheduled job with its flow
// fields; --run-at with --delay, or a bad time, is a usage error.
func TestCLISubmitScheduled(t *testing.T) {
	t.Parallel()
	b := setupServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	startBy := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	out, errOut, err := b.run(t, ctx, "submit", "--param", "case_id=47", "--param", "revision=29",
		"--delay", "1h", "--priority", "2", "--start-by", startBy)
	require.NoError(t, err, errOut)
	id := strings.TrimSpace(out)
	require.True(t, job.ValidID(id), out)
	out, _, err = b.run(t, ctx, "status", "--json", id)
	require.NoError(t, err)
	var res job.Resource
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, job.StateScheduled, res.State)
	require.WithinDuration(t, time.Now().Add(time.Hour), *res.RunAt, time.Minute)
	require.Equal(t, 2, res.Priority)
	require.Equal(t, startBy, res.StartBy.UTC().Format(time.RFC3339))

	_, _, err = b.run(t, ctx, "submit", "--param", "case_id=1", "--param", "revision=1", "--delay", "1h", "--run-at", startBy)
	require.ErrorContains(t, err, "--run-at and --delay exclude each other")
	_, _, err = b.run(t, ctx, "submit", "--param", "case_id=1", "--param", "revision=1", "--run-at", "at nine")
	require.ErrorContains(t, err, "--run-at must be an RFC 3339 time")
}
