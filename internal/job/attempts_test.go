package job

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

// Every lifecycle move that starts or ends an attempt writes it in the
// record's history, with its worker, times, outcome and error; the job's
// resource never shows it.
func TestAttemptHistoryFollowsTheLifecycle(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := &Record{ID: "job_x", State: StateQueued, CreatedAt: t0, UpdatedAt: t0}

	require.NoError(t, r.Claim("w1", at(1)))
	require.Len(t, r.Attempts, 1)
	require.Equal(t, Attempt{Attempt: 1, Worker: "w1", StartedAt: at(1)}, r.Attempts[0], "open while it runs")

	f := &Failure{Category: CategoryRenderError, Message: "the job's worker reported an error", Retryable: true}
	require.NoError(t, r.ScheduleRetry(f, at(10), at(2)))
	r.NoteCause("render: font cache at /var/cache/x corrupt")
	require.Equal(t, OutcomeFailed, r.Attempts[0].Outcome)
	require.Equal(t, at(2), *r.Attempts[0].EndedAt)
	require.Equal(t, "render: font cache at /var/cache/x corrupt", r.Attempts[0].Error.Message, "the full message is in the history")
	require.Equal(t, "the job's worker reported an error", r.Error.Message, "the owner reads the category's message")

	require.NoError(t, r.Claim("w2", at(10)))
	require.NoError(t, r.GiveBack(at(11)))
	require.Equal(t, OutcomeGivenBack, r.Attempts[1].Outcome)
	require.NoError(t, r.Claim("w3", at(12)))
	// w3 vanishes; w4 takes the job over.
	require.NoError(t, r.Claim("w4", at(40)))
	require.Equal(t, OutcomeWorkerLost, r.Attempts[2].Outcome)
	require.Equal(t, CategoryWorkerLost, r.Attempts[2].Error.Category)
	require.NoError(t, r.Succeed(&Output{Object: "o"}, at(41)))
	require.Len(t, r.Attempts, 4)
	require.Equal(t, OutcomeSucceeded, r.Attempts[3].Outcome)
	require.Equal(t, "w4", r.Attempts[3].Worker)
	require.Equal(t, 4, r.Attempts[3].Attempt)

	// The stored form keeps the history, the resource leaves it out (the
	// hand-built codecs write these same bytes: internal/codec).
	data, err := json.Marshal(r)
	require.NoError(t, err)
	var back Record
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, r.Attempts, back.Attempts, "stored")
	shown, err := json.Marshal(back.Resource("", time.Time{}))
	require.NoError(t, err)
	body := string(shown)
	require.NotContains(t, body, "attempts")
	require.NotContains(t, body, "font cache")

	c := &Record{ID: "job_y", State: StateQueued}
	require.NoError(t, c.Claim("w1", at(1)))
	require.NoError(t, c.Cancel(at(2)))
	require.Equal(t, OutcomeCanceled, c.Attempts[0].Outcome)

	s := &Record{ID: "job_z", State: StateQueued}
	require.NoError(t, s.Claim("w1", at(1)))
	require.NoError(t, s.Release(at(30))) // the sweeper: its worker vanished
	require.Equal(t, OutcomeWorkerLost, s.Attempts[0].Outcome)
	require.NoError(t, s.Claim("w2", at(31)))
	require.NoError(t, s.Fail(&Failure{Category: CategoryTimeout, Message: "late"}, at(32)))
	require.Equal(t, OutcomeFailed, s.Attempts[1].Outcome)
	require.Equal(t, "late", s.Attempts[1].Error.Message)
}

// The history is bounded: the latest MaxAttemptHistory attempts, each
// message at most MaxAttemptMessage bytes (cut on a rune boundary).
func TestAttemptHistoryIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	r := &Record{ID: "job_x", State: StateQueued}
	long := strings.Repeat("é", api.MaxAttemptMessage) // 2 bytes each
	for i := range 3 * api.MaxAttemptHistory {
		require.NoError(t, r.Claim("w", now))
		require.NoError(t, r.ScheduleRetry(&Failure{Category: CategoryRenderError, Message: long, Retryable: true}, now, now))
		_ = i
	}
	require.Len(t, r.Attempts, api.MaxAttemptHistory)
	require.Equal(t, 3*api.MaxAttemptHistory, r.Attempts[len(r.Attempts)-1].Attempt, "the latest are kept")
	msg := r.Attempts[0].Error.Message
	require.LessOrEqual(t, len(msg), api.MaxAttemptMessage)
	require.Greater(t, len(msg), api.MaxAttemptMessage-4)
	require.True(t, strings.HasPrefix(long, msg) && len(msg)%2 == 0, "cut on a rune boundary")
	r.NoteCause(long + long)
	require.LessOrEqual(t, len(r.Attempts[len(r.Attempts)-1].Error.Message), api.MaxAttemptMessage)
}

// AttemptTook reads an ended attempt's duration from its history entry.
func TestAttemptTookIsTheHistoryEntrysSpan(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	r := &Record{ID: "job_t", State: StateQueued, CreatedAt: t0, UpdatedAt: t0}
	require.NoError(t, r.Claim("w1", t0.Add(time.Second)))
	_, ok := r.AttemptTook(1)
	require.False(t, ok, "open while it runs")
	require.NoError(t, r.ScheduleRetry(&Failure{Category: CategoryRenderError, Retryable: true}, t0.Add(time.Minute), t0.Add(4*time.Second)))
	require.NoError(t, r.Claim("w2", t0.Add(time.Minute)))
	require.NoError(t, r.Succeed(nil, t0.Add(time.Minute+90*time.Second)))
	took, ok := r.AttemptTook(1)
	require.True(t, ok)
	require.Equal(t, 3*time.Second, took)
	took, ok = r.AttemptTook(2)
	require.True(t, ok)
	require.Equal(t, 90*time.Second, took)
	_, ok = r.AttemptTook(3)
	require.False(t, ok, "no such attempt")
}
