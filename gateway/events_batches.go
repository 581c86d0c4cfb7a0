package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// GET /v1/events carries a batch's changes as well as its items': after an
// item's `event: job` that moved the batch on, an `event: batch` with the
// batch resource (without its jobs), under the same id. A stream counts a
// batch from its items' records the first time one of its items changes
// (as GET /v1/batches/{id} does) and follows it from its items' events
// after that; it keeps at most maxStreamBatches batches in view, and lets
// one go once it is done.

// maxStreamBatches bounds the batches one stream follows at once; the
// least recently changed goes first (it is counted again if it changes).
// maxStreamDone bounds the done batches a stream remembers, so that their
// items' later events (a batch may be done in the records before the
// stream has sent all its items' changes) bring no second done event.
const (
	maxStreamBatches = 16
	maxStreamDone    = 64
)

type streamBatches struct {
	g            *Gateway
	tenant, user string
	views        map[string]*batchView
	order        []string // batch ids, least recently changed first
	done         map[string]bool
	doneOrder    []string
}

func (g *Gateway) newStreamBatches(tenant, requester string) *streamBatches {
	return &streamBatches{g: g, tenant: tenant, user: requester, views: map[string]*batchView{}, done: map[string]bool{}}
}

// after returns the batch event that e's change makes, if any: the batch
// resource's JSON; nil when e is no item's, or did not move its batch on,
// or the batch cannot be read now (its next change counts it again).
func (sb *streamBatches) after(e natsjs.RequesterEvent) []byte {
	if e.Batch == "" || !job.ValidBatchID(e.Batch) || sb.done[e.Batch] {
		return nil
	}
	var item struct {
		ID    string    `json:"id"`
		State job.State `json:"state"`
	}
	if json.Unmarshal(e.Data, &item) != nil {
		return nil
	}
	v := sb.views[e.Batch]
	if v == nil {
		// Counted from the records, which hold this change already.
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		b, err := sb.g.batches.Get(ctx, job.StoreKey(sb.tenant, sb.user, e.Batch))
		if err != nil {
			return nil
		}
		if v, err = sb.g.readBatchView(ctx, b); err != nil {
			return nil
		}
		v.indexed()
		sb.keep(e.Batch, v)
	} else {
		rec := &job.Record{Tenant: sb.tenant, Requester: sb.user, ID: item.ID, State: item.State, Revision: e.Revision}
		if !v.apply(rec) {
			return nil
		}
		sb.touch(e.Batch)
	}
	body, err := jsonMarshal(v.resource(0, 0))
	if err != nil {
		return nil
	}
	if v.done() {
		sb.drop(e.Batch)
		if len(sb.doneOrder) >= maxStreamDone {
			delete(sb.done, sb.doneOrder[0])
			sb.doneOrder = sb.doneOrder[1:]
		}
		sb.done[e.Batch] = true
		sb.doneOrder = append(sb.doneOrder, e.Batch)
	}
	return body
}

func (sb *streamBatches) keep(id string, v *batchView) {
	if len(sb.order) >= maxStreamBatches {
		sb.drop(sb.order[0])
	}
	sb.views[id] = v
	sb.order = append(sb.order, id)
}

func (sb *streamBatches) touch(id string) {
	sb.remove(id)
	sb.order = append(sb.order, id)
}

func (sb *streamBatches) drop(id string) {
	delete(sb.views, id)
	sb.remove(id)
}

func (sb *streamBatches) remove(id string) {
	for i, o := range sb.order {
		if o == id {
			sb.order = append(sb.order[:i], sb.order[i+1:]...)
			return
		}
	}
}

// writeBatchEvent writes an `event: batch` under id.
func writeBatchEvent(sw *streamWriter, id uint64, body []byte) {
	fmt.Fprintf(sw, "id: %d\nevent: batch\ndata: %s\n\n", id, body)
}
