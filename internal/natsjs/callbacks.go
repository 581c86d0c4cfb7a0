package natsjs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jobgate/jobgate/internal/endpointcb"
	"github.com/nats-io/nats.go"
)

// CallbackRelay sends an asynchronous endpoint attempt's callbacks from a
// gateway to the endpoint caller process that holds the attempt, as core
// NATS requests on endpointcb.Subject(route) (docs/endpoints.md, "202").
type CallbackRelay struct{ nc *nats.Conn }

// NewCallbackRelay relays over nc.
func NewCallbackRelay(nc *nats.Conn) *CallbackRelay { return &CallbackRelay{nc: nc} }

// Relay sends one callback (a result chunk, the last one marked) and
// returns the caller's answer; endpointcb.ErrGone when no process holds
// the route's attempts any more.
func (r *CallbackRelay) Relay(ctx context.Context, route, token, op string, data []byte, last bool) (endpointcb.Reply, error) {
	m := nats.NewMsg(endpointcb.Subject(route))
	m.Header.Set(endpointcb.HeaderToken, token)
	m.Header.Set(endpointcb.HeaderOp, op)
	if last {
		m.Header.Set(endpointcb.HeaderLast, "1")
	}
	m.Data = data
	resp, err := r.nc.RequestMsgWithContext(ctx, m)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return endpointcb.Reply{}, fmt.Errorf("relay a callback: %w", endpointcb.ErrGone)
	case err != nil:
		return endpointcb.Reply{}, fmt.Errorf("relay a callback: %w", err)
	}
	var reply endpointcb.Reply
	if err := json.NewDecoder(bytes.NewReader(resp.Data)).Decode(&reply); err != nil || reply.Status == 0 {
		return endpointcb.Reply{}, fmt.Errorf("the endpoint caller's answer: %q", resp.Data)
	}
	return reply, nil
}
