package notifier

import (
	"context"
	"github.com/jobgate/jobgate/test/jobtest"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

type lockedBuffer = jobtest.SyncBuffer

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://hooks.example.com/t/SECRET?token=SECRET": "https://hooks.example.com/…",
		"https://hooks.example.com:8443/x":                "https://hooks.example.com:8443/…",
		"https://hooks.example.com":                       "https://hooks.example.com",
		"https://hooks.example.com/":                      "https://hooks.example.com",
		"https://hooks.example.com/?SECRET":               "https://hooks.example.com/…",
		"https://user:SECRET@hooks.example.com/":          "https://hooks.example.com",
		"http://[::1]:9/SECRET#SECRET":                    "http://[::1]:9/…",
		"::SECRET not a url":                              "(invalid URL)",
	} {
		require.Equal(t, want, RedactURL(in), in)
	}
}

// A receiver's URL carries its secret in path and query; neither reaches a
// log line nor the stored delivery state, whatever the failure.
func TestWebhookURLSecretsStayOutOfLogsAndState(t *testing.T) {
	t.Parallel()
	const secretPath, secretQuery = "p4th-s3cret", "qu3ry-s3cret"
	// A port nothing listens on: every attempt fails with a dial error,
	// whose text quotes the URL it tried.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String() + "/hooks/" + secretPath + "?token=" + secretQuery
	require.NoError(t, ln.Close())
	rcv := newReceiver(t, statuses(http.StatusBadGateway))
	refusing := rcv.srv.URL + "/hooks/" + secretPath + "?token=" + secretQuery

	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n0, b := setup(t, Config{})
	require.NoError(t, n0.Stop(context.Background())) // the deliveries are this test's notifier's, with its logger
	cfg := Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: dead, Secret: testSecret}, {URL: refusing, Secret: testSecret}}},
		AllowPrivate: true,
		Retries:      []time.Duration{10 * time.Millisecond},
		StopGrace:    5 * time.Second, AckWait: 5 * time.Second, Instance: "redact",
	}
	n, err := New(cfg, storesOf(b.res), log)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Stop(context.Background())) })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, n.Start(ctx))
	b.publish(t, record("4", "reviewer-47", "job_redact", job.StateSucceeded))
	require.Eventually(t, func() bool { return n.Stats().Settled == 2 }, waitTimeout, 10*time.Millisecond)
	require.Equal(t, 2, rcv.count(), "the refusing receiver was tried")

	out := logs.String()
	require.Contains(t, out, "webhook delivery failed", "the failures are logged")
	require.NotContains(t, out, secretPath)
	require.NotContains(t, out, secretQuery)

	kv, err := b.res.JS.KeyValue(ctx, natsjs.BucketNotices)
	require.NoError(t, err)
	keys, err := kv.ListKeys(ctx)
	require.NoError(t, err)
	seen := 0
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err == jetstream.ErrKeyNotFound {
			continue
		}
		require.NoError(t, err)
		require.NotContains(t, string(e.Value()), secretPath, k)
		require.NotContains(t, string(e.Value()), secretQuery, k)
		seen++
	}
	require.GreaterOrEqual(t, seen, 2, "both deliveries left a state")

	// Start-up refusals name the endpoint without its secrets, too.
	bad := Config{Webhooks: map[string][]Webhook{"4": {{URL: "http://10.1.2.3/hooks/" + secretPath + "?token=" + secretQuery, Secret: testSecret}}}}
	bad = bad.withDefaults()
	verr := bad.validate()
	require.ErrorIs(t, verr, ErrForbiddenAddress)
	require.NotContains(t, verr.Error(), secretPath)
	require.NotContains(t, verr.Error(), secretQuery)
}
