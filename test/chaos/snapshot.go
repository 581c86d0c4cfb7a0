package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// record is the part of a stored job record the checker needs, decoded
// here rather than with the services' types: the test reads the bucket the
// way an operator's tool would.
type record struct {
	ID         string     `json:"id"`
	Tenant     string     `json:"tenant"`
	Requester  string     `json:"requester"`
	KeyHash    string     `json:"key_hash"`
	State      string     `json:"state"`
	Attempt    int        `json:"attempt"`
	FinishedAt *time.Time `json:"finished_at"`
	Error      *struct {
		Category string `json:"category"`
		Message  string `json:"message"`
	} `json:"error"`
	Output *struct {
		Object string `json:"object"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"output"`
	Batch       string     `json:"batch"`
	BatchNotify string     `json:"batch_notify"` // "" is the default, "batch"
	Type        string     `json:"type"`
	RunAt       *time.Time `json:"run_at"`
	Attempts    []struct {
		StartedAt time.Time `json:"started_at"`
	} `json:"attempts"`
	Params struct {
		Customer string `json:"customer"`
	} `json:"params"`
	rev uint64
}

// readRecords reads every job record of the bucket, each at its latest
// revision.
func readRecords(ctx context.Context, js jetstream.JetStream) (map[string]*record, error) {
	kv, err := js.KeyValue(ctx, natsjs.BucketJobs)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", natsjs.BucketJobs, err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", natsjs.BucketJobs, err)
	}
	defer func() { _ = w.Stop() }()
	out := map[string]*record{}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("watch ended")
			}
			if e == nil {
				return out, nil // the initial values are all delivered
			}
			var r record
			if err := json.Unmarshal(e.Value(), &r); err != nil || r.ID == "" {
				continue
			}
			r.rev = e.Revision()
			out[r.ID] = &r
		}
	}
}

// waitSettled waits until every acknowledged job is terminal and its
// terminal change was delivered to the webhook sink (for an item of a
// batch notified as one: its batch's batch.completed), and the relays
// have no record change in hand, or ctx ends. It returns how many jobs
// there are, how many are not settled, and how many changes the relays
// still had (pending or unacknowledged) when it returned.
//
// The relays' part: the event of a terminal change whose writer did not
// store it (its dispatcher killed between the record's write and the
// event, or its publish lost in a NATS fault) is stored by a dispatcher's
// relay, 2 s after the change, or after the relay consumer's ack wait (30
// s) when the relay that held the change died or was cut off. A batch's
// notice is made from the records (notifier/batch.go), not from its items'
// events, so the notice of a batch says nothing of whether its items'
// terminal events are stored yet: without this wait the final state could
// be read inside that window and an event still on its way counted as
// never published.
func (r *run) waitSettled(ctx context.Context, nc *nats.Conn) (int, int, uint64) {
	js, _ := jetstream.New(nc)
	r.mu.Lock()
	ids := make([]string, 0, len(r.jobs))
	for id := range r.jobs {
		ids = append(ids, id)
	}
	notice := map[string]string{} // job → the batch whose notice tells of it
	for bid, b := range r.batches {
		if b.notify == "batch" {
			for _, id := range b.jobs {
				notice[id] = bid
			}
		}
	}
	r.mu.Unlock()
	delivered := func(id, state string) bool {
		if bid, ok := notice[id]; ok {
			return r.hook.delivered(bid, batchCompleted)
		}
		return r.hook.delivered(id, state)
	}
	pending := len(ids)
	inHand := uint64(0)
	for {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		recs, err := readRecords(rctx, js)
		if err == nil {
			pending = 0
			for _, id := range ids {
				rec := recs[id]
				if rec == nil || !terminal(rec.State) || !delivered(id, rec.State) {
					pending++
				}
			}
			if pending == 0 {
				inHand, err = relaysInHand(rctx, js)
			}
		}
		cancel()
		if err == nil && pending == 0 && inHand == 0 {
			return len(ids), 0, 0
		}
		if !sleepCtx(ctx, time.Second) {
			return len(ids), pending, inHand
		}
	}
}

// relaysInHand counts the record changes the dispatchers' relays have not
// finished with: pending on, or delivered and not acknowledged by, the job
// relay's and the batch relay's durable consumers.
func relaysInHand(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	var n uint64
	for _, c := range []struct{ stream, consumer string }{
		{"KV_" + natsjs.BucketJobs, natsjs.ConsumerRelay},
		{"KV_" + natsjs.BucketBatches, natsjs.ConsumerBatchRelay},
	} {
		cons, err := js.Consumer(ctx, c.stream, c.consumer)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue // no relay of that kind started: nothing in its hands
		}
		if err != nil {
			return 0, fmt.Errorf("consumer %s: %w", c.consumer, err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("consumer %s: %w", c.consumer, err)
		}
		n += info.NumPending + uint64(info.NumAckPending)
	}
	return n, nil
}

// snapshot writes the final state to the history: the bucket, the result
// objects, the events stream, each requester's GET /v1/jobs, a sample of
// downloaded results and the mails.
func (r *run) snapshot(ctx context.Context, nc *nats.Conn, a *api) {
	js, _ := jetstream.New(nc)
	retry := func(what string, f func(context.Context) error) {
		var err error
		for i := range 5 {
			c, cancel := context.WithTimeout(ctx, 60*time.Second)
			err = f(c)
			cancel()
			if err == nil {
				return
			}
			r.o.Logf("final %s (try %d): %v", what, i+1, err)
			time.Sleep(time.Second)
		}
		r.h.Add(Entry{Kind: "phase", Phase: "snapshot-error", Err: fmt.Sprintf("%s: %v", what, err)})
	}
	var recs map[string]*record
	retry("records", func(c context.Context) (err error) { recs, err = readRecords(c, js); return err })
	ids := make([]string, 0, len(recs))
	for id := range recs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		rec := recs[id]
		e := Entry{Kind: "final-job", Job: id, Requester: rec.Requester, State: rec.State, Attempt: rec.Attempt, Rev: rec.rev, KeyHash: rec.KeyHash}
		if rec.FinishedAt != nil {
			e.Finished = *rec.FinishedAt
		}
		if rec.Error != nil {
			e.Error = rec.Error.Category
			e.Note = rec.Error.Message
		}
		if rec.Output != nil {
			e.Object, e.Size, e.Digest = rec.Output.Object, rec.Output.Size, rec.Output.SHA256
		}
		if rec.Batch != "" {
			e.Batch, e.Notify = rec.Batch, orBatch(rec.BatchNotify)
		}
		e.Type = rec.Type
		if rec.RunAt != nil {
			e.RunAt = *rec.RunAt
		}
		for _, a := range rec.Attempts {
			e.Starts = append(e.Starts, a.StartedAt)
		}
		if rec.Type == flowType {
			e.FlowKey = rec.Params.Customer
		}
		r.h.Add(e)
	}
	retry("objects", func(c context.Context) error {
		os, err := js.ObjectStore(c, natsjs.BucketResults)
		if err != nil {
			return err
		}
		infos, err := os.List(c)
		if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
			return err
		}
		for _, in := range infos {
			r.h.Add(Entry{Kind: "final-object", Name: in.Name, Size: int64(in.Size), Digest: digestHex(in.Digest)})
		}
		return nil
	})
	retry("events", func(c context.Context) error { return r.readEvents(c, js) })
	for _, rq := range requesters {
		retry("list "+rq, func(c context.Context) error { return r.list(c, a, rq) })
	}
	retry("batches", func(c context.Context) error { return r.readBatches(c, a) })
	// Download up to 10 results through the gateways: the end-to-end path.
	n := 0
	for _, id := range ids {
		if rec := recs[id]; rec.State == "succeeded" && n < 10 {
			n++
			r.h.Add(r.fetch(ctx, a, rec))
		}
	}
	for _, e := range mailEntries(r.smtp) {
		r.h.Add(e)
	}
}

// digestHex turns an object store digest ("SHA-256=<base64url>") into hex.
func digestHex(d string) string {
	b64, ok := strings.CutPrefix(d, "SHA-256=")
	if !ok {
		return d
	}
	b, err := base64.URLEncoding.DecodeString(b64)
	if err != nil {
		return d
	}
	return hex.EncodeToString(b)
}

// readEvents reads the whole JOBGATE_EVENTS stream in order, message by
// message from the stream leader (an ordered consumer's pulls can meet "no
// responders" on a loaded cluster while its new consumer propagates).
func (r *run) readEvents(ctx context.Context, js jetstream.JetStream) error {
	s, err := js.Stream(ctx, natsjs.StreamEvents)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	var out []Entry
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		var m *jetstream.RawStreamMsg
		for try := 0; ; try++ {
			m, err = s.GetMsg(ctx, seq)
			if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) || try == 10 || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("event %d: %w", seq, err)
		}
		var res resource
		_ = json.Unmarshal(m.Data, &res)
		id := m.Header.Get(jetstream.MsgIDHeader)
		e := Entry{Kind: "final-event", Job: res.ID, MsgID: id, State: res.State, Attempt: res.Attempt, Done: res.done(), Seq: seq}
		if i := strings.LastIndexByte(id, '.'); i > 0 {
			e.Rev = parseUint(id[i+1:])
		}
		out = append(out, e)
	}
	for _, e := range out {
		r.h.Add(e)
	}
	r.h.Add(Entry{Kind: "phase", Phase: "events-read", Note: fmt.Sprintf("%d events", len(out))})
	return nil
}

// readBatches reads every acknowledged batch through the gateways (GET
// /v1/batches/{id}, all its jobs in one page), so the checker can hold
// the counts the gateway counts against the records. A 404 is recorded:
// the checker judges it.
func (r *run) readBatches(ctx context.Context, a *api) error {
	r.mu.Lock()
	ids := make([]string, 0, len(r.batches))
	for id := range r.batches {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	sort.Strings(ids)
	out := make([]Entry, 0, len(ids))
	for i, id := range ids {
		r.mu.Lock()
		rq := r.batches[id].requester
		r.mu.Unlock()
		var (
			resp *http.Response
			data []byte
			err  error
			u    string
		)
		// A 429 or 5xx is tried again (through the other gateway) a few
		// times before the whole read fails; the deadline is ctx's.
		for try := 0; ; try++ {
			u = a.gateways[(i+try)%len(a.gateways)] + "/v1/batches/" + id + "?limit=1000"
			resp, data, err = a.do(ctx, a.long, http.MethodGet, u, rq, nil, nil)
			if err == nil && !retryable(resp.StatusCode, nil) {
				break
			}
			if try == 5 || !sleepCtx(ctx, time.Duration(200<<try)*time.Millisecond) {
				if err == nil {
					err = fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, data)
				}
				return err
			}
		}
		e := Entry{Kind: "final-batch", Batch: id, Requester: rq, Status: resp.StatusCode}
		if resp.StatusCode == http.StatusOK {
			var b batchResource
			if err := json.Unmarshal(data, &b); err != nil {
				return fmt.Errorf("GET %s: %w", u, err)
			}
			if b.NextCursor != "" {
				return fmt.Errorf("GET %s: %d jobs and a next page", u, len(b.Jobs))
			}
			e.Notify, e.BatchDone, e.Counts, e.Items, e.Created = b.Notify, b.Done, b.Counts, b.Jobs, b.CreatedAt
		}
		out = append(out, e)
	}
	for _, e := range out {
		r.h.Add(e)
	}
	r.h.Add(Entry{Kind: "phase", Phase: "batches-read", Note: fmt.Sprintf("%d batches", len(out))})
	return nil
}

// list pages through GET /v1/jobs of one requester.
func (r *run) list(ctx context.Context, a *api, requester string) error {
	var out []Entry
	cursor := ""
	for page := 0; ; page++ {
		u := a.gateways[page%len(a.gateways)] + "/v1/jobs?limit=100"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		resp, data, err := a.do(ctx, a.long, http.MethodGet, u, requester, nil, nil)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, data)
		}
		var p struct {
			Jobs       []resource `json:"jobs"`
			NextCursor string     `json:"next_cursor"`
		}
		if err := json.Unmarshal(data, &p); err != nil {
			return err
		}
		for _, j := range p.Jobs {
			out = append(out, Entry{Kind: "final-list", Requester: requester, Job: j.ID, State: j.State, Attempt: j.Attempt})
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	for _, e := range out {
		r.h.Add(e)
	}
	return nil
}

// fetch downloads a succeeded job's result: 303 to a signed link, then the
// file, whose SHA-256 the checker compares with the record.
func (r *run) fetch(ctx context.Context, a *api, rec *record) Entry {
	e := Entry{Kind: "fetch", Job: rec.ID, Requester: rec.Requester}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.gateways[0]+"/v1/jobs/"+rec.ID+"/result", nil)
	req.Header.Set("Authorization", "Bearer "+a.tokens[rec.Requester])
	resp, err := a.stream.Do(req)
	if err != nil {
		e.Err = err.Error()
		return e
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		e.Status, e.Err = resp.StatusCode, "want 303"
		return e
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "http") {
		loc = a.gateways[0] + loc
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	resp, err = a.stream.Do(req)
	if err != nil {
		e.Err = err.Error()
		return e
	}
	defer resp.Body.Close()
	e.Status = resp.StatusCode
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		e.Err = err.Error()
	}
	e.Size, e.Digest = n, hex.EncodeToString(h.Sum(nil))
	return e
}
