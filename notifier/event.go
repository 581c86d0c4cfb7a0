package notifier

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// errBadEvent: a message on the events stream that is not a job event. It is
// terminated, never retried.
var errBadEvent = errors.New("not a job event")

// event is one job state change as the notifier sees it.
type event struct {
	// ID identifies the state change: the Nats-Msg-Id it was published with
	// (<job_id>.<revision>), the same on every redelivery. It is the
	// webhook-id.
	ID string
	// Revision is the record revision of the change (from ID); 0 if the
	// event was published without one.
	Revision  uint64
	Tenant    string
	Requester string
	Job       *job.Resource
	// Data is the job resource exactly as published (a batch notice's
	// data for a batch notice).
	Data json.RawMessage
	// batch is set on a batch's one notice (batch.go): Job then names the
	// batch.
	batch *batchNotice
}

// decodeEvent reads an event from its subject, data and message id.
func decodeEvent(subject string, data []byte, msgID string) (*event, error) {
	tenant, requester, id, ok := natsjs.ScopeOf(subject)
	if !ok {
		return nil, fmt.Errorf("%w: subject %q", errBadEvent, subject)
	}
	var res job.Resource
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadEvent, err)
	}
	if res.ID != id || !res.State.Valid() {
		return nil, fmt.Errorf("%w: job %q state %q on subject of %q", errBadEvent, res.ID, res.State, id)
	}
	ev := &event{ID: msgID, Tenant: tenant, Requester: requester, Job: &res, Data: data}
	if rev, ok := natsjs.EventRevision(msgID); ok && msgID == res.ID+"."+strconv.FormatUint(rev, 10) {
		ev.Revision = rev
	}
	if ev.ID == "" {
		// Published without a message id (jobgate's own events always
		// carry <job_id>.<revision>): derive a stable one from what the
		// event says, so the webhook-id still does not change on retries.
		ev.ID = res.ID + "." + string(res.State) + "." + strconv.Itoa(res.Attempt)
	}
	return ev, nil
}

// webhookPayload is the body of a delivery (Standard Webhooks shape).
// Revision orders the changes of one job: an endpoint gets them in order,
// but a receiver with several endpoints, or one that processes deliveries
// concurrently, keeps the highest revision it has seen per job and ignores
// older ones.
type webhookPayload struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Revision  uint64          `json:"revision,omitempty"`
	Data      json.RawMessage `json:"data"`
}

// webhookBody builds the delivery body once per event, so every attempt
// carries the same bytes.
func (ev *event) webhookBody() ([]byte, error) {
	if ev.batch != nil {
		return json.Marshal(webhookPayload{
			Type:      "batch.completed",
			Timestamp: ev.batch.FinishedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			Data:      ev.Data,
		})
	}
	return json.Marshal(webhookPayload{
		Type:      "job." + string(ev.Job.State),
		Timestamp: ev.Job.UpdatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		Revision:  ev.Revision,
		Data:      ev.Data,
	})
}

// jobScope names the event's job in the notifier's keys: its id and its
// created_at. A job admitted again under the same key after its record
// expired has the same id (ids derive from the key) but a later created_at,
// so its notices are a scope of their own and the old job's delivery states
// and mail claims, which may outlive its record, do not swallow them.
func (ev *event) jobScope() string {
	return keyToken(ev.Job.ID) + ".c" + strconv.FormatInt(ev.Job.CreatedAt.UnixMilli(), 10)
}

// webhookKey is the delivery state of the event at one endpoint.
func (ev *event) webhookKey(endpoint string) string {
	return "wh." + endpoint + "." + ev.jobScope() + "." + keyToken(ev.ID)
}

// mailScope names the one mail of the event's job and state.
func (ev *event) mailScope() string {
	return ev.Tenant + "." + ev.Requester + "." + ev.jobScope() + "." + string(ev.Job.State)
}
