package pipeline

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// sample is one series of a gathered family: its labels as name=value
// pairs, its value (a counter's or gauge's, a histogram's sample count).
type sample struct {
	labels map[string]string
	value  float64
}

func samples(t *testing.T, m *metrics.Metrics, family string) []sample {
	t.Helper()
	fams, err := m.Registry.Gather()
	require.NoError(t, err)
	var out []sample
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, s := range f.GetMetric() {
			x := sample{labels: map[string]string{}}
			for _, l := range s.GetLabel() {
				x.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case s.Counter != nil:
				x.value = s.GetCounter().GetValue()
			case s.Gauge != nil:
				x.value = s.GetGauge().GetValue()
			case s.Histogram != nil:
				x.value = float64(s.GetHistogram().GetSampleCount())
			}
			out = append(out, x)
		}
	}
	return out
}

// valueOf is the value of the family's series with exactly these labels
// (false: no such series).
func valueOf(t *testing.T, m *metrics.Metrics, family string, labels map[string]string) (float64, bool) {
	t.Helper()
	for _, s := range samples(t, m, family) {
		if len(s.labels) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && s.labels[k] == v
		}
		if match {
			return s.value, true
		}
	}
	return 0, false
}

// A user type's job that fails once and then succeeds is counted by the
// broker as one retry and one success, each with its duration; a queued
// job of a type no worker runs shows in the per-type gauges and its age.
func TestAUserTypesAttemptsAndQueueAreExported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.brokerOnce.Do(func() {}) // the dispatcher's broker is the only one: it counts every verdict
	m := metrics.New()
	base, tok := b.gateway(t)
	b.dispatcher(t, "dispatcher", func(c *dispatcher.Config) { c.Metrics = m })

	var runs atomic.Int32
	b.startWorkers(t, "flaky", func(w *worker.Workers) {
		require.NoError(t, worker.Register(w, worker.Type[struct{}]{
			Name: "flaky_export", Description: "fails its first attempt", ContentType: "text/plain", Attempts: 3,
			Work: func(ctx context.Context, j *worker.Job[struct{}]) error {
				if runs.Add(1) == 1 {
					return errors.New("a transient failure")
				}
				_, err := j.Output().Write([]byte("ok\n"))
				return err
			},
		}))
	})
	var first answer
	require.Eventually(t, func() bool {
		first = call(t, "POST", base+"/v1/jobs", tok, "flaky-1", `{"type":"flaky_export","params":{}}`)
		return first.status == http.StatusAccepted
	}, 10*time.Second, 50*time.Millisecond)
	done := jobtest.Terminal(t, b.conn.Res, job.StoreKey("4", "reviewer-47", first.body["id"].(string)), 30*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)
	require.Equal(t, 2, done.Attempt)

	of := func(outcome string) map[string]string {
		return map[string]string{"type": "flaky_export", "outcome": outcome}
	}
	require.Eventually(t, func() bool {
		n, _ := valueOf(t, m, "jobgate_attempts_total", of("succeeded"))
		return n == 1
	}, 10*time.Second, 20*time.Millisecond)
	retried, _ := valueOf(t, m, "jobgate_attempts_total", of("retry"))
	require.Equal(t, 1.0, retried)
	_, failed := valueOf(t, m, "jobgate_attempts_total", of("failed"))
	require.False(t, failed)
	for _, outcome := range []string{"retry", "succeeded"} {
		n, ok := valueOf(t, m, "jobgate_attempt_duration_seconds", of(outcome))
		require.True(t, ok, outcome)
		require.Equal(t, 1.0, n, "one %s attempt observed", outcome)
	}

	// A job of a type no worker runs waits queued, counted by type, its
	// tenant's oldest job aged from its admission.
	admitted := time.Now().Add(-10 * time.Minute).UTC()
	b.env.CommitAs(t, b.conn.Res, jobtest.Request{Tenant: "9", Key: "unstaffed-1"}, func(r *job.Record) {
		r.Type, r.CreatedAt, r.UpdatedAt = "unstaffed_export", admitted, admitted
	})
	require.Eventually(t, func() bool {
		n, _ := valueOf(t, m, "jobgate_jobs", map[string]string{"type": "unstaffed_export", "state": "queued"})
		return n == 1
	}, 10*time.Second, 20*time.Millisecond)
	running, _ := valueOf(t, m, "jobgate_jobs", map[string]string{"type": "unstaffed_export", "state": "running"})
	require.Zero(t, running)
	age, ok := valueOf(t, m, "jobgate_oldest_queued_seconds", map[string]string{"type": "unstaffed_export", "tenant": "9"})
	require.True(t, ok)
	require.GreaterOrEqual(t, age, 600.0)
	require.Less(t, age, 3600.0)
}
