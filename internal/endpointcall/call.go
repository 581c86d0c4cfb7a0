package endpointcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobgate/jobgate/internal/egress"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/internal/stdwebhook"
	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/internal/workerhook"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/endpoint"
	"github.com/jobgate/jobgate/pkg/worker"
)

// Bounds of what a handler sends back besides the result.
const (
	// maxErrorBody is how much of a refusal's body is read for its
	// problem document's detail.
	maxErrorBody = 64 << 10
	// maxDrain is how much of an unread body is read to keep the
	// connection for the next request; a longer one is closed.
	maxDrain = 64 << 10
	// maxDetail bounds the problem detail kept as the owner's message
	// (the protocol keeps 500 printable bytes of it).
	maxDetail = 1 << 10
)

// WebhookID is the webhook-id of an attempt's request: stable across the
// deliveries of one attempt, new for each attempt.
func WebhookID(jobID string, attempt int) string { return jobID + ".a" + strconv.Itoa(attempt) }

// call does one attempt of an endpoint type's job: the signed POST, the
// answer turned into the attempt's outcome as pkg/worker reports it (nil
// succeeds with what was written to j.Output(); a failure of
// workerhook.Failure; the context's error when the attempt was canceled,
// taken over or timed out, which pkg/worker classifies itself).
func (r *runner) call(ctx context.Context, j *worker.Job[json.RawMessage]) (err error) {
	ep := r.endpoint.Load()
	keys, err := r.c.keys.signing(ctx, j.Type)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return workerhook.Failure(wire.KindInternal, true, "", fmt.Errorf("signing secret: %w", err), 0)
	}
	deadline, _ := ctx.Deadline()
	var callback string
	var async *asyncAttempt
	if cb := r.c.cb; cb != nil {
		var unregister func()
		callback, async, unregister = cb.register(j)
		defer unregister()
	}
	body, err := json.Marshal(endpoint.Request{Job: endpoint.Attempt{
		ID: j.ID, Type: j.Type, Tenant: j.Tenant, Requester: j.Requester, Attempt: j.Attempt, Attempts: j.Attempts,
		CreatedAt: j.CreatedAt.UTC(), Params: j.Params, Deadline: deadline.UTC(),
	}, Callback: callback})
	if err != nil {
		return workerhook.Failure(wire.KindInternal, true, "", err, 0)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return workerhook.Failure(wire.KindEndpointRejected, false, "the endpoint's URL is not usable", egress.RedactErr(err, ep.URL), 0)
	}
	id := WebhookID(j.ID, j.Attempt)
	ts := r.c.cfg.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "jobgate-endpoint-caller")
	req.Header.Set(stdwebhook.HeaderID, id)
	req.Header.Set(stdwebhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(stdwebhook.HeaderSignature, stdwebhook.SignAll(keys, id, ts, body))
	m := r.c.cfg.Metrics
	sctx, span := startCallSpan(ctx, j, ep.URL)
	status, accepted := 0, false
	defer func() {
		outcome := callOutcome(ctx, status, accepted, err)
		m.Outcome(j.Type, outcome)
		endCallSpan(span, status, accepted, outcome)
	}()
	tracing.SetHeader(sctx, req.Header, "", "")
	m.InFlight(j.Type, 1)
	defer m.InFlight(j.Type, -1)
	sent := time.Now()
	resp, err := r.c.http.Do(req)
	if err != nil {
		answer := "error"
		if ctx.Err() != nil {
			answer = "aborted"
		}
		m.Request(j.Type, answer, time.Since(sent))
		if ctx.Err() != nil {
			return ctx.Err() // canceled, taken over, timed out or stopping: pkg/worker's to classify
		}
		// A connection the address rule refused (JOBGATE_ENDPOINT_ALLOW)
		// is retried as any other: the operator may allow the range.
		cause := egress.RedactErr(err, ep.URL)
		return workerhook.Failure(wire.KindEndpointError, true, "", fmt.Errorf("POST %s: %w", egress.RedactURL(ep.URL), cause), 0)
	}
	status = resp.StatusCode
	err = r.answer(ctx, j, ep, resp, async != nil)
	resp.Body.Close()
	m.Request(j.Type, statusClass(resp.StatusCode), time.Since(sent))
	if errors.Is(err, errAccepted) {
		// The request is over; the attempt goes on, holding its slot.
		accepted = true
		return r.await(sctx, j, async)
	}
	return err
}

// errAccepted is answer's word for a 202 taken: the attempt goes on
// through its callbacks.
var errAccepted = errors.New("accepted: asynchronous")

// statusClass is an answer's label: 2xx to 5xx.
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "error"
	}
	return strconv.Itoa(status/100) + "xx"
}

// answer turns the handler's answer into the attempt's outcome
// (docs/endpoints.md, "Answers").
func (r *runner) answer(ctx context.Context, j *worker.Job[json.RawMessage], ep *api.Endpoint, resp *http.Response, callbacks bool) error {
	host := egress.RedactURL(ep.URL)
	status := resp.StatusCode
	switch {
	case status == http.StatusOK || status == http.StatusCreated:
		// The body is the result, streamed into the result store (never
		// held whole); past max_result_bytes the output refuses it and
		// the attempt fails too_large.
		_, err := io.Copy(j.Output(), resp.Body)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, worker.ErrResultTooLarge), errors.Is(err, worker.ErrResultRefused):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		return workerhook.Failure(wire.KindEndpointError, true, "", fmt.Errorf("POST %s: reading the %d answer: %w", host, status, egress.RedactErr(err, ep.URL)), 0)
	case status == http.StatusNoContent:
		drain(resp.Body)
		return nil
	case status == http.StatusRequestTimeout || status == http.StatusTooEarly || status == http.StatusTooManyRequests || status >= 500:
		drain(resp.Body)
		after := retry.After(resp.Header, r.c.cfg.Now())
		return workerhook.Failure(wire.KindEndpointError, true, "", fmt.Errorf("POST %s: answered %d", host, status), after)
	case status == http.StatusAccepted && callbacks:
		drain(resp.Body)
		return errAccepted
	case status == http.StatusAccepted:
		drain(resp.Body)
		return workerhook.Failure(wire.KindEndpointRejected, false, "the endpoint answered 202 (asynchronous), but this deployment offers no callbacks (JOBGATE_PUBLIC_URL unset)",
			fmt.Errorf("POST %s: answered 202", host), 0)
	case status >= 400:
		detail := problemDetail(resp)
		return workerhook.Failure(wire.KindEndpointRejected, false, detail, fmt.Errorf("POST %s: answered %d: %s", host, status, detail), 0)
	}
	// 1xx is the transport's; 3xx (redirects are not followed) and the
	// other 2xx are answers no attempt of the same URL would change.
	drain(resp.Body)
	return workerhook.Failure(wire.KindEndpointRejected, false, fmt.Sprintf("the endpoint answered %d, which is not an answer jobgate takes", status),
		fmt.Errorf("POST %s: answered %d", host, status), 0)
}

// problemDetail is the detail of a refusal's problem document (RFC 9457,
// or any JSON object with a string "detail"), made printable and cut to
// maxDetail bytes; empty when there is none.
func problemDetail(resp *http.Response) string {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/problem+json" && mt != "application/json" {
		drain(resp.Body)
		return ""
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return ""
	}
	var p struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(data, &p) != nil {
		return ""
	}
	d := strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return ' '
		}
		return c
	}, strings.ToValidUTF8(p.Detail, ""))
	d = strings.TrimSpace(d)
	if len(d) > maxDetail {
		d = d[:maxDetail]
		for !utf8.ValidString(d) {
			d = d[:len(d)-1]
		}
	}
	return d
}

// drain reads a little of an unread body so its connection can carry the
// next request; a longer body's connection is closed with it.
func drain(body io.Reader) { _, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrain)) }
