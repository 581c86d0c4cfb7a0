package notifier

import (
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/stretchr/testify/require"
)

// What Stats counts is what /metrics exports: one count, kept in the
// metrics package.
func TestDeliveriesAreExported(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusInternalServerError, http.StatusNoContent))
	m := metrics.New()
	n, b := setup(t, Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: rcv.srv.URL, Secret: testSecret}}},
		AllowPrivate: true,
		Retries:      []time.Duration{20 * time.Millisecond},
		Metrics:      m,
	})
	b.publish(t, record("4", "reviewer-47", "job_counted", job.StateSucceeded))
	require.Eventually(t, func() bool { return n.Stats().Settled == 1 }, waitTimeout, 10*time.Millisecond)

	s := n.Stats()
	require.Equal(t, int64(1), s.WebhooksDelivered)
	require.Equal(t, int64(1), s.WebhookRetries)
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	values := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			for _, l := range mt.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			values[key] = mt.GetCounter().GetValue()
		}
	}
	require.Equal(t, 1.0, values["jobgate_notice_events_total"])
	require.Equal(t, 1.0, values["jobgate_deliveries_total channel=webhook outcome=delivered"])
	require.Equal(t, 1.0, values["jobgate_deliveries_total channel=webhook outcome=retry"])
}
