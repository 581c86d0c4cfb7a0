package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/endpointcb"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
)

// callbackRelay sends a callback to the endpoint caller holding its
// attempt (natsjs.CallbackRelay): endpointcb.ErrGone when none does.
type callbackRelay interface {
	Relay(ctx context.Context, route, token, op string, data []byte, last bool) (endpointcb.Reply, error)
}

// callbackTimeout bounds one relayed callback (a result chunk included):
// the caller answers once the attempt took it.
const callbackTimeout = 10 * time.Second

// callbackRoutes are the callbacks of asynchronous endpoint attempts
// (docs/endpoints.md, "202"). The token in the path is their only
// credential: no bearer token, no rate limit of a requester's.
//
// The gateway checks the token's signature (a token jobgate did not mint
// names no attempt: 404) and relays the callback over NATS to the
// endpoint caller process that holds the attempt, which applies it
// through the attempt's claim, so the broker's rules (state, fencing,
// limits) judge it as any worker's step. An attempt that process no
// longer holds, or a process that is gone, answers 409 attempt-lost.
//
// A result is read whole by the transport, like every request body, so
// it is bounded by the gateway's body limit (1 MiB) besides the type's
// max_result_bytes; it is relayed in chunks of endpointcb.ChunkBytes.
func (g *Gateway) callbackRoutes() {
	a := g.app
	a.Post("/v1/callbacks/:token/"+endpointcb.OpBeat, g.callback(endpointcb.OpBeat))
	a.Put("/v1/callbacks/:token/"+endpointcb.OpResult, g.callback(endpointcb.OpResult))
	a.Post("/v1/callbacks/:token/"+endpointcb.OpDone, g.callback(endpointcb.OpDone))
	a.Post("/v1/callbacks/:token/"+endpointcb.OpFail, g.callback(endpointcb.OpFail))
}

var errNoAttempt = job.Userf(job.ErrNotFound, "no attempt has this callback token")

func (g *Gateway) callback(op string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if g.cfg.Callbacks == nil || g.cbSecret == nil {
			return writeProblem(c, errNoAttempt)
		}
		tok := strings.Clone(c.Params("token"))
		at, ok := endpointcb.Parse(g.cbSecret, tok)
		if !ok {
			return writeProblem(c, errNoAttempt)
		}
		body := c.Body()
		if op != endpointcb.OpResult && len(body) > maxBody {
			return writeProblem(c, job.ErrPayloadTooLarge)
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), callbackTimeout)
		defer cancel()
		var reply endpointcb.Reply
		var err error
		if op == endpointcb.OpResult {
			// Every chunk, the empty result's one included; the last
			// says the result is whole.
			for off := 0; ; off += endpointcb.ChunkBytes {
				end := min(off+endpointcb.ChunkBytes, len(body))
				reply, err = g.cfg.Callbacks.Relay(ctx, at.Route, tok, op, body[off:end], end == len(body))
				if err != nil || reply.Status >= 300 || end == len(body) {
					break
				}
			}
		} else {
			reply, err = g.cfg.Callbacks.Relay(ctx, at.Route, tok, op, body, false)
		}
		switch {
		case errors.Is(err, endpointcb.ErrGone):
			// The process that held the attempt is gone: so is the
			// attempt's claim.
			return g.attemptLost(c, ctx, at)
		case err != nil:
			return writeProblem(c, fmt.Errorf("%w: relay a callback: %w", job.ErrUnavailable, err))
		case reply.Status == http.StatusConflict && reply.Detail == "":
			return g.attemptLost(c, ctx, at)
		case reply.Status < 300:
			c.Set(fiber.HeaderCacheControl, "no-store")
			return c.SendStatus(http.StatusNoContent)
		case reply.Status == http.StatusRequestEntityTooLarge:
			return writeProblem(c, job.Userf(job.ErrPayloadTooLarge, "%s", reply.Detail))
		case reply.Status == http.StatusConflict:
			return writeProblem(c, &api.AttemptLostError{})
		case reply.Status == http.StatusNotFound:
			return writeProblem(c, job.ErrNotFound)
		}
		return writeProblem(c, job.Userf(errBadRequest, "%s", reply.Detail))
	}
}

// attemptLost answers 409 attempt-lost, saying whether the owner canceled
// the job (from its record); a job no longer kept names no attempt.
func (g *Gateway) attemptLost(c *fiber.Ctx, ctx context.Context, at endpointcb.Attempt) error {
	rec, err := g.jobs.Get(ctx, job.StoreKey(at.Tenant, at.Requester, at.Job))
	switch {
	case errors.Is(err, job.ErrNotFound):
		return writeProblem(c, errNoAttempt)
	case err != nil:
		return writeProblem(c, err)
	}
	return writeProblem(c, &api.AttemptLostError{Canceled: rec.State == job.StateCanceled})
}
