package notifier

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jobgate/jobgate/internal/egress"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
)

// endpoint is a configured webhook, ready to deliver.
type endpoint struct {
	tenant string
	url    string
	host   string // for logs: the URL may carry a token in its path or query
	key    []byte
	id     string
	states map[job.State]bool
}

func newEndpoint(tenant string, h Webhook) (*endpoint, error) {
	key, err := DecodeSecret(h.Secret)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(h.URL)
	if err != nil {
		return nil, redactErr(err, h.URL)
	}
	ep := &endpoint{tenant: tenant, url: h.URL, host: u.Host, key: key, id: endpointKey(tenant, h.URL)}
	if len(h.States) > 0 {
		ep.states = map[job.State]bool{}
		for _, s := range h.States {
			ep.states[s] = true
		}
	}
	return ep, nil
}

func (ep *endpoint) wants(s job.State) bool { return ep.states == nil || ep.states[s] }

// outcome is where one channel stands with one event: done (delivered, or
// given up for good), or to be tried again at due.
type outcome struct {
	done bool
	due  time.Time
	// pauseUntil: the endpoint asked that nothing be sent to it before
	// this (429 or 503 with Retry-After).
	pauseUntil time.Time
}

var finished = outcome{done: true}

// transientDelay is how soon an event is retried after a failure of the
// notifier's own state store (not counted as a delivery attempt).
const transientDelay = 2 * time.Second

// runWebhook makes at most one delivery attempt of ev at ep, if one is due.
func (n *Notifier) runWebhook(ctx context.Context, ep *endpoint, ev *event, body []byte) outcome {
	key := ev.webhookKey(ep.id)
	log := n.log.With("tenant", ev.Tenant, "job", ev.Job.ID, "state", ev.Job.State, "webhook_id", ev.ID, "endpoint", ep.id, "host", ep.host)
	st, err := loadState(ctx, n.notices, key)
	if err != nil {
		return n.transient(ctx, log, err)
	}
	if st.final() {
		return finished
	}
	now := n.cfg.Now()
	if now.Before(st.NextAt) {
		return outcome{due: st.NextAt}
	}
	off, err := exists(ctx, n.notices, "whoff."+ep.id)
	if err != nil {
		return n.transient(ctx, log, err)
	}
	if off {
		st.Status, st.LastError = statusDisabled, "endpoint disabled after 410 Gone"
		if err := n.putState(ctx, key, st); err != nil {
			return n.transient(ctx, log, err)
		}
		log.WarnContext(ctx, "webhook not sent: endpoint disabled")
		return finished
	}
	st.Attempts++
	// The attempt's span: a child of the job's trace (ctx), sent with the
	// request (post) so the receiver continues it.
	ctx, span := n.startDeliverySpan(ctx, "webhook POST", "webhook", ev, st.Attempts,
		attribute.String("http.request.method", http.MethodPost), attribute.String("server.address", ep.host),
		attribute.String("jobgate.endpoint", ep.id))
	spanOutcome := spanRetry
	var spanAttrs []attribute.KeyValue
	defer func() { endDeliverySpan(span, spanOutcome, spanAttrs...) }()
	status, retryAfter, err := n.post(ctx, ep, ev.ID, body)
	if status != 0 {
		spanAttrs = append(spanAttrs, attribute.Int("http.response.status_code", status))
	}
	if ctx.Err() != nil {
		// Shutting down: the attempt was cut short by us, not the receiver.
		spanOutcome = spanCanceled
		return outcome{due: now}
	}
	st.Instance = n.cfg.Instance
	switch {
	case err == nil && status >= 200 && status < 300:
		st.Status, st.LastError, st.NextAt = statusDelivered, "", time.Time{}
		n.stats.webhooksDelivered.Add(1)
		spanOutcome = spanDelivered
		log.DebugContext(ctx, "webhook delivered", "attempt", st.Attempts, "status", status)
		if err := n.putState(ctx, key, st); err != nil {
			// Delivered but not recorded: the retry repeats the delivery,
			// which receivers dedupe by webhook-id.
			return n.transient(ctx, log, err)
		}
		return finished
	case err == nil && status == http.StatusGone:
		if _, err := n.notices.Create(ctx, "whoff."+ep.id, []byte(n.cfg.Now().UTC().Format(time.RFC3339))); err != nil &&
			!errors.Is(err, natsjs.ErrExists) {
			return n.transient(ctx, log, err)
		}
		st.Status, st.LastError, st.NextAt = statusDisabled, "410 Gone", time.Time{}
		n.stats.endpointsDisabled.Add(1)
		spanOutcome = spanDisabled
		log.WarnContext(ctx, "webhook endpoint answered 410 Gone: disabled for every instance")
		if err := n.putState(ctx, key, st); err != nil {
			return n.transient(ctx, log, err)
		}
		return finished
	case errors.Is(err, ErrForbiddenAddress):
		st.Status, st.LastError, st.NextAt = statusRefused, err.Error(), time.Time{}
		n.stats.webhooksRefused.Add(1)
		n.stats.webhooksFailed.Add(1)
		spanOutcome = spanRefused
		log.ErrorContext(ctx, "webhook refused: the endpoint resolves to a non-public address (set allow_private_webhooks to permit)", "err", err)
		if err := n.putState(ctx, key, st); err != nil {
			return n.transient(ctx, log, err)
		}
		return finished
	}
	if err != nil {
		st.LastError = err.Error()
	} else {
		st.LastError = "HTTP " + strconv.Itoa(status)
	}
	if st.Attempts > len(n.cfg.Retries) {
		st.Status, st.NextAt = statusFailed, time.Time{}
		n.stats.webhooksFailed.Add(1)
		spanOutcome = spanFailed
		log.ErrorContext(ctx, "webhook delivery failed for good", "attempts", st.Attempts, "last_error", st.LastError)
		if err := n.putState(ctx, key, st); err != nil {
			return n.transient(ctx, log, err)
		}
		return finished
	}
	delay := n.backoff(st.Attempts, retryAfter)
	st.Status, st.NextAt = statusPending, n.cfg.Now().Add(delay)
	n.stats.webhookRetries.Add(1)
	spanAttrs = append(spanAttrs, attribute.Float64("jobgate.delivery.retry_in_seconds", delay.Seconds()))
	log.InfoContext(ctx, "webhook delivery failed, will retry", "attempt", st.Attempts, "last_error", st.LastError, "retry_in", delay)
	if err := n.putState(ctx, key, st); err != nil {
		return n.transient(ctx, log, err)
	}
	o := outcome{due: st.NextAt}
	if err == nil && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && retryAfter > 0 {
		// "Come back later" is the endpoint's, not this delivery's: the
		// whole destination waits, instead of one request per job.
		o.pauseUntil = n.cfg.Now().Add(min(retryAfter, n.cfg.MaxRetryAfter))
	}
	return o
}

// post sends one signed delivery and returns the response status and the
// receiver's Retry-After, if any.
func (n *Notifier) post(ctx context.Context, ep *endpoint, id string, body []byte) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, redactErr(err, ep.url)
	}
	ts := n.cfg.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "jobgate-notifier")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(ep.key, id, ts, body))
	// The delivery span's context (the job's, without an SDK): the
	// receiver's spans join the job's trace.
	tracing.SetHeader(ctx, req.Header, "", "")
	resp, err := n.http.Do(req)
	if err != nil {
		// The client's error quotes the URL, with the receiver's token.
		return 0, 0, redactErr(err, ep.url)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	return resp.StatusCode, retry.After(resp.Header, n.cfg.Now()), nil
}

// backoff is the delay after the attempt-th failed attempt: the schedule's
// entry spread by ± Jitter, and at least the receiver's Retry-After (capped).
func (n *Notifier) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := retry.Spread(n.cfg.Retries[attempt-1], n.cfg.Jitter, rand.Float64)
	return retry.NotBefore(d, retryAfter, n.cfg.MaxRetryAfter)
}

// newHTTPClient builds the client of webhook deliveries (egress.NewClient:
// no proxy, no redirects, the guarded dialer).
func newHTTPClient(cfg *Config) *http.Client {
	return egress.NewClient(egress.Policy{AllowAll: cfg.AllowPrivate}, cfg.Timeout, 4)
}

// transient logs a failure of the notifier's own state store; the event is
// tried again soon without counting a delivery attempt.
func (n *Notifier) transient(ctx context.Context, log *slog.Logger, err error) outcome {
	log.WarnContext(ctx, "notice state unavailable, will retry", "err", err)
	return outcome{due: n.cfg.Now().Add(transientDelay)}
}
