package endpointcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/endpointcb"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/internal/workerhook"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/nats-io/nats.go"
)

// An attempt answered 202 goes on in the handler's background: the caller
// keeps its claim (pkg/worker beats it to the broker as for any attempt
// in flight) and serves the attempt's callbacks, which the gateway relays
// to this process on endpointcb.Subject(route). So each callback meets
// the broker's rules through the one claim: a beat's progress goes out
// with the claim's beats, the result streams into the result store
// through the attempt's output, and done or fail ends the attempt as an
// answer would, answered once the broker has the verdict on record. Once the attempt is no longer held here (it ended, timed
// out, was canceled or taken over) its token finds nothing and the
// gateway answers 409 attempt-lost.

// asyncAttempt is an attempt whose callbacks this process serves.
type asyncAttempt struct {
	ops   chan *callbackOp
	ended chan struct{}
}

// callbackOp is one relayed callback, handed to the attempt's call.
type callbackOp struct {
	op   string
	body []byte
	last bool
	done chan endpointcb.Reply
}

// callbacks serves the callbacks of this process's attempts.
type callbacks struct {
	secret []byte
	base   string
	route  string
	mu     sync.Mutex
	byTok  map[string]*asyncAttempt
	sub    *nats.Subscription
}

// startCallbacks subscribes to this process's callbacks; without a public
// URL or a secret the caller offers none (a 202 fails the attempt).
func (c *Caller) startCallbacks(ctx context.Context) error {
	if c.cfg.PublicURL == "" || c.stores.Secrets == nil {
		return nil
	}
	secret, err := c.stores.Secrets.Get(ctx, c.cfg.CallbackSecret)
	if err != nil {
		return fmt.Errorf("endpoint caller: the callback secret: %w", err)
	}
	cb := &callbacks{secret: secret, base: c.cfg.PublicURL, route: c.route, byTok: map[string]*asyncAttempt{}}
	cb.sub, err = c.cfg.Conn.Subscribe(endpointcb.Subject(c.route), func(m *nats.Msg) { go cb.serve(m) })
	if err != nil {
		return fmt.Errorf("endpoint caller: subscribe to the callbacks: %w", err)
	}
	c.cb = cb
	return nil
}

// register makes j's attempt reachable by its token's callbacks until the
// returned func is called; the token goes in the request's body.
func (cb *callbacks) register(j *worker.Job[json.RawMessage]) (url string, a *asyncAttempt, unregister func()) {
	tok := endpointcb.Mint(cb.secret, endpointcb.Attempt{Route: cb.route, Tenant: j.Tenant, Requester: j.Requester, Job: j.ID, Attempt: j.Attempt})
	a = &asyncAttempt{ops: make(chan *callbackOp), ended: make(chan struct{})}
	cb.mu.Lock()
	cb.byTok[tok] = a
	cb.mu.Unlock()
	return cb.base + "/v1/callbacks/" + tok, a, func() {
		cb.mu.Lock()
		delete(cb.byTok, tok)
		cb.mu.Unlock()
		close(a.ended)
	}
}

// serve hands a relayed callback to its attempt and answers with the
// attempt's verdict; an attempt not held here answers 409.
func (cb *callbacks) serve(m *nats.Msg) {
	reply := func(r endpointcb.Reply) {
		data, _ := json.Marshal(r)
		_ = m.Respond(data)
	}
	cb.mu.Lock()
	a := cb.byTok[m.Header.Get(endpointcb.HeaderToken)]
	cb.mu.Unlock()
	if a == nil {
		reply(endpointcb.Reply{Status: http.StatusConflict})
		return
	}
	op := &callbackOp{op: m.Header.Get(endpointcb.HeaderOp), body: m.Data, last: m.Header.Get(endpointcb.HeaderLast) != "", done: make(chan endpointcb.Reply, 1)}
	select {
	case a.ops <- op:
	case <-a.ended:
		reply(endpointcb.Reply{Status: http.StatusConflict})
		return
	}
	reply(<-op.done)
}

// await serves a 202's attempt until the handler reports done or fail,
// stops beating, or the attempt ends (canceled, timed out, taken over).
func (r *runner) await(ctx context.Context, j *worker.Job[json.RawMessage], a *asyncAttempt) error {
	quiet := r.c.cfg.AsyncBeatTimeout
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	var stored bool
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return workerhook.Failure(wire.KindEndpointError, true, "",
				fmt.Errorf("the handler answered 202 and sent no callback for %s: the attempt is lost", quiet), 0)
		case op := <-a.ops:
			reply, end := r.callback(j, op, &stored)
			callbackEvent(ctx, op.op, reply.Status)
			if end != nil && reply.Status == http.StatusNoContent && (op.op == endpointcb.OpDone || op.op == endpointcb.OpFail) {
				// Taken: answered once the broker has the verdict on
				// record (verdictHeard), or 409 when it refused it.
				r.pending.Store(WebhookID(j.ID, j.Attempt), op)
				return end.err
			}
			op.done <- reply
			if end != nil {
				return end.err
			}
			timer.Reset(quiet)
		}
	}
}

// ending is an attempt's outcome decided by a callback (err nil: success).
type ending struct{ err error }

func (r *runner) callback(j *worker.Job[json.RawMessage], op *callbackOp, stored *bool) (endpointcb.Reply, *ending) {
	bad := func(detail string) (endpointcb.Reply, *ending) {
		return endpointcb.Reply{Status: http.StatusBadRequest, Detail: detail}, nil
	}
	switch op.op {
	case endpointcb.OpBeat:
		var b endpointcb.Beat
		if len(bytes.TrimSpace(op.body)) > 0 && json.Unmarshal(op.body, &b) != nil {
			return bad("a beat's body is {\"progress\": {\"done\", \"total\", \"unit\"}}, or empty")
		}
		if p := b.Progress; p != nil {
			if p.Done < 0 || p.Total < 0 {
				return bad("progress counts are not negative")
			}
			j.Progress(p.Done, p.Total, p.Unit)
		}
		return endpointcb.Reply{Status: http.StatusNoContent}, nil
	case endpointcb.OpResult:
		if *stored {
			return endpointcb.Reply{Status: http.StatusBadRequest, Detail: "the result was uploaded already: an attempt has one"}, nil
		}
		if _, err := io.Copy(j.Output(), bytes.NewReader(op.body)); err != nil {
			if errors.Is(err, worker.ErrResultTooLarge) {
				return endpointcb.Reply{Status: http.StatusRequestEntityTooLarge, Detail: "the result exceeds the type's max_result_bytes: the attempt failed too_large"}, &ending{err}
			}
			return endpointcb.Reply{Status: http.StatusConflict, Detail: "the result was refused: the job failed"}, &ending{err}
		}
		*stored = op.last
		return endpointcb.Reply{Status: http.StatusNoContent}, nil
	case endpointcb.OpDone:
		return endpointcb.Reply{Status: http.StatusNoContent}, &ending{nil}
	case endpointcb.OpFail:
		var f endpointcb.Fail
		if json.Unmarshal(op.body, &f) != nil || f.Message == "" {
			return bad("a fail's body is {\"message\", \"user_message\"?, \"retryable\"?} with a message")
		}
		retryable := f.Retryable == nil || *f.Retryable
		kind := wire.KindError
		if !retryable {
			kind = wire.KindPermanent
		}
		return endpointcb.Reply{Status: http.StatusNoContent}, &ending{workerhook.Failure(kind, retryable, f.UserMessage, errors.New(f.Message), 0)}
	}
	return endpointcb.Reply{Status: http.StatusNotFound}, nil
}

// verdictHeard answers an attempt's done or fail callback once pkg/worker
// has reported its verdict (workerhook.Verdict): 204 when the broker
// recorded it, else 409, for the attempt is no longer current (the broker
// refused it as lost, or could not be reached and the claim goes stale).
// So a handler that was answered 204 finds the job's state changed.
func (r *runner) verdictHeard(id string, attempt int, outcome string) {
	v, ok := r.pending.LoadAndDelete(WebhookID(id, attempt))
	if !ok {
		return
	}
	status := http.StatusConflict
	if outcome == workerhook.VerdictRecorded {
		status = http.StatusNoContent
	}
	v.(*callbackOp).done <- endpointcb.Reply{Status: status}
}
