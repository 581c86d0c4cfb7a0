package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
	jobapi "github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/nats-io/nats.go"
)

// flowType is the job type with flow limits the run submits beside the
// reports: at most flowLimit jobs of one customer (a params concurrency
// key) run at once across the deployment, and its starts are rate
// limited. Its worker is the harness's own (startFlowWorker), so the
// faults hit the brokers that enforce the limits and the NATS cluster
// that holds the places, not the worker.
const (
	flowType  = "chaos_export"
	flowLimit = 1
	// flowRate and flowBurst are the type's rate limit: attempts started
	// across the deployment, judged on the claims' times (checkRate).
	flowRate  = 2
	flowBurst = 4
)

var flowCustomers = []string{"c1", "c2", "c3"}

type flowParams struct {
	Customer string `json:"customer"`
	N        int    `json:"n"`
}

const flowSchema = `{"type":"object","additionalProperties":false,"required":["customer","n"],` +
	`"properties":{"customer":{"type":"string","maxLength":16},"n":{"type":"integer","minimum":1}}}`

// startFlowWorker runs the worker of flowType on a connection of its own:
// four attempts at once, each 200-700 ms, every one recorded (kind "work":
// Job, Attempt, FlowKey, Start and End as the handler saw them).
func startFlowWorker(ctx context.Context, natsURL string, h *History) (func(), error) {
	nc, err := nats.Connect(natsURL, nats.Name("chaos-flow-worker"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("flow worker: %w", err)
	}
	w, err := worker.New(worker.Config{Conn: nc, Name: "chaos-flow-1", Credential: wire.CredentialID("chaos-worker")})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("flow worker: %w", err)
	}
	err = worker.Register(w, worker.Type[flowParams]{
		Name: flowType, Description: "the chaos run's flow-limited type", Schema: json.RawMessage(flowSchema),
		Timeout: 30 * time.Second, Concurrency: 4, ContentType: "text/plain",
		ConcurrencyKeys: []jobapi.ConcurrencyKey{{Key: "/params/customer", Limit: flowLimit}},
		RateLimit:       &jobapi.RateLimit{PerSecond: flowRate, Burst: flowBurst},
		Work: func(ctx context.Context, j *worker.Job[flowParams]) error {
			e := Entry{Kind: "work", Job: j.ID, Attempt: j.Attempt, FlowKey: j.Params.Customer, Start: time.Now()}
			t := time.NewTimer(time.Duration(200+rand.IntN(500)) * time.Millisecond)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
			if _, err := fmt.Fprintf(j.Output(), "export %s #%d\n", j.Params.Customer, j.Params.N); err != nil {
				return err
			}
			e.End = time.Now()
			h.Add(e)
			return nil
		},
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("flow worker: %w", err)
	}
	if err := w.Start(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("flow worker: %w", err)
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
		nc.Close()
	}, nil
}
