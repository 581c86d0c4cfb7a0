package notifier

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jobgate/jobgate/test/jobtest"

	"github.com/jobgate/jobgate/internal/job"
)

// BenchmarkWebhookDelivery measures events delivered end to end: published
// on JOBGATE_EVENTS, signed, POSTed to a loopback receiver, recorded in the
// NOTICES bucket and acknowledged.
func BenchmarkWebhookDelivery(b *testing.B) {
	rcv := newReceiver(b, statuses(http.StatusNoContent))
	n, bundle := setup(b, Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: rcv.srv.URL, Secret: testSecret}}},
		AllowPrivate: true,
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bundle.publish(b, record("4", "reviewer-47", "job_bench_"+strconv.Itoa(i), job.StateSucceeded))
	}
	waitB(b, func() bool { return n.Stats().Settled == int64(b.N) })
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkMailDelivery measures terminal events turned into one SMTP mail
// each, claims included, through a loopback SMTP sink.
func BenchmarkMailDelivery(b *testing.B) {
	sink := jobtest.NewSMTPSink(b)
	n, bundle := setup(b, smtpConfig(sink, "bench"))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bundle.publish(b, record("4", "reviewer-47", "job_mbench_"+strconv.Itoa(i), job.StateSucceeded))
	}
	waitB(b, func() bool { return n.Stats().Settled == int64(b.N) })
	b.StopTimer()
	if got := len(sink.Received()); got != b.N {
		b.Fatalf("%d mails for %d jobs", got, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "mails/s")
}

func waitB(b *testing.B, cond func() bool) {
	deadline := time.Now().Add(5 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("benchmark work did not finish")
		}
		time.Sleep(time.Millisecond)
	}
}
