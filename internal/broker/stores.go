package broker

import (
	"context"
	"io"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
)

// Stores are the adapters a broker works on, every one required (New names
// a missing one). system maps the provisioned resources to them.
type Stores struct {
	Jobs    *natsjs.Store       // job records: claims, beats and outcomes (JOBGATE_JOBS)
	Work    *natsjs.WorkQueue   // work messages: the lanes it schedules, the retries it publishes (JOBGATE_WORK)
	Events  *natsjs.EventStream // the events of the changes it writes (JOBGATE_EVENTS)
	Secrets *natsjs.Secrets     // the claim secret (JOBGATE_META)
	Types   *natsjs.TypeStore   // type declarations and worker presence (JOBGATE_TYPES, JOBGATE_WORKERS)
	Slots   *natsjs.SlotStore   // the places and rate buckets of the types' flow control (JOBGATE_SLOTS)
	Results                     // result objects, stored from the workers' uploads (JOBGATE_RESULTS)
	Conn    *nats.Conn          // the connection it answers the workers on, with jobgate's own permissions
}

// Results stores, checks and removes result objects (natsjs.Resources), and
// reads what each tenant stores (its result quota, upload.go).
type Results interface {
	PutResult(ctx context.Context, obj natsjs.ResultObject, body io.Reader) (int64, error)
	ResultInfo(ctx context.Context, name string) (size int64, sha256 string, err error)
	DeleteResult(ctx context.Context, name string) error
	TenantUse(ctx context.Context) (map[string]int64, error)
}
