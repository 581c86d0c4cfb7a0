package notifier

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// verify checks a delivery the way a Standard Webhooks receiver does.
func verify(t *testing.T, d delivery) (id string, ts int64) {
	t.Helper()
	key, err := DecodeSecret(testSecret)
	require.NoError(t, err)
	id = d.header.Get(HeaderID)
	ts, err = strconv.ParseInt(d.header.Get(HeaderTimestamp), 10, 64)
	require.NoError(t, err)
	want := Sign(key, id, ts, d.body)
	require.True(t, hmac.Equal([]byte(want), []byte(d.header.Get(HeaderSignature))), "signature of %s", id)
	return id, ts
}

func TestWebhookFailsTwiceThenSucceeds(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusNoContent))
	// Delays over a second, so the second-resolution timestamps must grow.
	n, b := setup(t, Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: rcv.srv.URL + "/hooks/jobs", Secret: testSecret}}},
		AllowPrivate: true,
		Retries:      []time.Duration{1100 * time.Millisecond, 1100 * time.Millisecond, time.Hour},
		Jitter:       0.05,
	})
	r := record("4", "reviewer-47", "job_fails_twice", job.StateSucceeded)
	b.publish(t, r)

	require.Eventually(t, func() bool { return n.Stats().Settled == 1 }, waitTimeout, 10*time.Millisecond)
	got := rcv.deliveries()
	require.Len(t, got, 3, "two failures, then the success; nothing after it")
	var lastTS int64
	for i, d := range got {
		id, ts := verify(t, d)
		require.Equal(t, natsjs.EventMsgID(r), id, "webhook-id is the event id on every attempt")
		require.Greater(t, ts, lastTS, "attempt %d has a later timestamp", i+1)
		lastTS = ts
		require.Equal(t, string(got[0].body), string(d.body), "every attempt carries the same body")
	}
	var payload struct {
		Type string       `json:"type"`
		Data job.Resource `json:"data"`
	}
	require.NoError(t, json.Unmarshal(got[0].body, &payload))
	require.Equal(t, "job.succeeded", payload.Type)
	require.Equal(t, r.ID, payload.Data.ID)
	require.Equal(t, job.StateSucceeded, payload.Data.State)
	require.NotNil(t, payload.Data.Result)
	require.Empty(t, payload.Data.Result.Href, "events carry no signed link")
	s := n.Stats()
	require.Equal(t, int64(1), s.WebhooksDelivered)
	require.Equal(t, int64(2), s.WebhookRetries)
	require.Zero(t, s.WebhooksFailed)
}

func TestWebhookHonorsRetryAfter(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	n, b := setup(t, Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: rcv.srv.URL, Secret: "raw secret"}}},
		AllowPrivate: true,
		Retries:      []time.Duration{10 * time.Millisecond},
	})
	b.publish(t, record("4", "reviewer-47", "job_retry_after", job.StateFailed))
	require.Eventually(t, func() bool { return n.Stats().Settled == 1 }, waitTimeout, 10*time.Millisecond)
	got := rcv.deliveries()
	require.Len(t, got, 2)
	require.GreaterOrEqual(t, got[1].at.Sub(got[0].at), 2*time.Second, "the second attempt waits for Retry-After, not the 10ms schedule")
}

func TestWebhookGivesUpAfterSchedule(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusBadGateway))
	n, b := setup(t, Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: rcv.srv.URL, Secret: testSecret}}},
		AllowPrivate: true,
		Retries:      []time.Duration{20 * time.Millisecond, 40 * time.Millisecond},
	})
	r := record("4", "reviewer-47", "job_never_delivered", job.StateSucceeded)
	b.publish(t, r)
	require.Eventually(t, func() bool { return n.Stats().Settled == 1 }, waitTimeout, 10*time.Millisecond)
	require.Equal(t, 3, rcv.count(), "one attempt plus one per schedule entry")
	s := n.Stats()
	require.Equal(t, int64(1), s.WebhooksFailed)
	require.Equal(t, int64(2), s.WebhookRetries)
	// The final failure is on record for operators, too.
	st, err := loadState(context.Background(), b.res.Notices, eventOf(r).webhookKey(endpointKey("4", rcv.srv.URL)))
	require.NoError(t, err)
	require.Equal(t, statusFailed, st.Status)
	require.Equal(t, 3, st.Attempts)
	require.Equal(t, "HTTP 502", st.LastError)
}

func TestWebhookGoneDisablesEndpointForEveryInstance(t *testing.T) {
	t.Parallel()
	gone := newReceiver(t, statuses(http.StatusGone))
	other := newReceiver(t, statuses(http.StatusOK))
	cfg := Config{
		Webhooks: map[string][]Webhook{"4": {
			{URL: gone.srv.URL, Secret: testSecret},
			{URL: other.srv.URL, Secret: testSecret},
		}},
		AllowPrivate: true,
		Retries:      []time.Duration{10 * time.Millisecond},
		Instance:     "first",
	}
	first, b := setup(t, cfg)
	b.publish(t, record("4", "reviewer-47", "job_one", job.StateSucceeded))
	require.Eventually(t, func() bool { return first.Stats().Settled == 2 }, waitTimeout, 10*time.Millisecond)
	require.Equal(t, 1, gone.count(), "410 is not retried")
	require.Equal(t, int64(1), first.Stats().EndpointsDisabled)
	require.NoError(t, first.Stop(context.Background()))

	// A new instance (no memory of the first) skips the disabled endpoint
	// and still serves the other one.
	cfg.Instance = "second"
	second := b.start(t, cfg)
	b.publish(t, record("4", "reviewer-47", "job_two", job.StateSucceeded))
	require.Eventually(t, func() bool { return second.Stats().Settled == 2 }, waitTimeout, 10*time.Millisecond)
	require.Equal(t, 1, gone.count(), "the disabled endpoint gets nothing more")
	require.Equal(t, 2, other.count())
}

func TestWebhookRetryDoesNotBlockOtherDeliveries(t *testing.T) {
	t.Parallel()
	failing := newReceiver(t, statuses(http.StatusInternalServerError))
	working := newReceiver(t, statuses(http.StatusOK))
	n, b := setup(t, Config{
		Webhooks: map[string][]Webhook{
			"4": {{URL: failing.srv.URL, Secret: testSecret}},
			"5": {{URL: working.srv.URL, Secret: testSecret}},
		},
		AllowPrivate: true,
		Retries:      []time.Duration{time.Hour},
		Concurrency:  1, // one worker: a blocking retry would hold everything
	})
	b.publish(t, record("4", "reviewer-47", "job_waits", job.StateSucceeded))
	require.Eventually(t, func() bool { return failing.count() == 1 }, waitTimeout, 10*time.Millisecond)
	for i := range 5 {
		b.publish(t, record("5", "reviewer-9", "job_next_"+strconv.Itoa(i), job.StateSucceeded))
	}
	require.Eventually(t, func() bool { return working.count() == 5 }, waitTimeout, 10*time.Millisecond)
	// A delivery counts as settled once it is acknowledged, a moment after
	// the receiver answered.
	require.Eventually(t, func() bool { return n.Stats().Settled == 5 }, waitTimeout, 10*time.Millisecond)
	require.Equal(t, 1, failing.count(), "the failed delivery waits for its hour")
}

func TestWebhookStatesFilter(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusOK))
	n, b := setup(t, Config{
		Webhooks: map[string][]Webhook{"4": {{URL: rcv.srv.URL, Secret: testSecret,
			States: []job.State{job.StateSucceeded, job.StateFailed, job.StateCanceled}}}},
		AllowPrivate: true,
	})
	for _, s := range []job.State{job.StateQueued, job.StateRunning, job.StateSucceeded} {
		b.publish(t, record("4", "reviewer-47", "job_filtered", s))
	}
	require.Eventually(t, func() bool { return n.Stats().Events == 3 && n.Stats().Settled == 1 }, waitTimeout, 10*time.Millisecond)
	got := rcv.deliveries()
	require.Len(t, got, 1)
	id, _ := verify(t, got[0])
	require.Equal(t, "job_filtered.3", id)
}

func TestWebhookRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusOK))

	// At start-up: literal private addresses and localhost names.
	for _, u := range []string{rcv.srv.URL, "http://localhost:9/x", "http://10.1.2.3/x", "http://[::1]:80/", "http://[::ffff:192.168.0.1]/", "http://169.254.169.254/latest"} {
		cfg := Config{Webhooks: map[string][]Webhook{"4": {{URL: u, Secret: testSecret}}}}
		cfg = cfg.withDefaults()
		require.ErrorIs(t, cfg.validate(), ErrForbiddenAddress, u)
	}

	// At dial time: an endpoint whose name passed the start-up check but
	// resolves to loopback now (the URL here stands for such a name).
	n, b := setup(t, Config{Retries: []time.Duration{10 * time.Millisecond}})
	require.NoError(t, n.Stop(context.Background()))
	ep, err := newEndpoint("4", Webhook{URL: rcv.srv.URL, Secret: testSecret})
	require.NoError(t, err)
	n2 := b.build(t, Config{Retries: []time.Duration{10 * time.Millisecond}, Instance: "guarded"})
	n2.endpoints["4"] = []*endpoint{ep}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, n2.Start(ctx))
	b.publish(t, record("4", "reviewer-47", "job_ssrf", job.StateSucceeded))
	require.Eventually(t, func() bool { return n2.Stats().Settled == 1 }, waitTimeout, 10*time.Millisecond)
	require.Zero(t, rcv.count(), "nothing reached the loopback receiver")
	s := n2.Stats()
	require.Equal(t, int64(1), s.WebhooksRefused)
	require.Equal(t, int64(1), s.WebhooksFailed)
	require.Zero(t, s.WebhookRetries, "a refusal is final")
}

func TestSignMatchesStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	// The example of the Standard Webhooks specification.
	key, err := DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)

	raw, err := DecodeSecret("not prefixed")
	require.NoError(t, err)
	require.Equal(t, []byte("not prefixed"), raw)
	_, err = DecodeSecret("whsec_!!!")
	require.Error(t, err)
}

func TestPublicAddr(t *testing.T) {
	t.Parallel()
	for addr, public := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700:4700::1111": true,
		"127.0.0.1": false, "10.0.0.1": false, "172.16.5.4": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "0.0.0.0": false, "255.255.255.255": false, "224.0.0.1": false,
		"::1": false, "::": false, "fc00::1": false, "fe80::1": false, "::ffff:127.0.0.1": false,
		"64:ff9b::a00:1": false, "64:ff9b::808:808": true, "2002:c0a8:101::1": false,
	} {
		require.Equal(t, public, PublicAddr(mustAddr(t, addr)), addr)
	}
}
