package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/recent"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// IndexBlock is how many entries of one requester share a subject of the
// index stream. A page reads whole blocks (one request each), and finding a
// requester's newest entry matches its block subjects, so the block size
// trades page reads against that match.
const IndexBlock = 64

// IndexEntry is one admission in a requester's index: the job, and its
// place in the requester's newest-first order.
type IndexEntry struct {
	// Ordinal counts the requester's admissions (0, 1, 2, ...); newer jobs
	// have higher ordinals.
	Ordinal uint64 `json:"o"`
	ID      string `json:"id"`
	// Created is the record's created_at (Unix nanoseconds): an entry of an
	// earlier job under the same id (admitted again after its record
	// expired) does not match the record that lives now.
	Created int64 `json:"c"`
}

// Index is JOBGATE_INDEX, the per-requester list of admissions, newest
// first, that GET /v1/jobs pages through. The dispatchers' indexer appends
// an entry for every job it sees in the record change log (admission itself
// writes nothing more); readers take pages by ordinal, each
// page costing a few requests whatever the requester's history. Entries live
// as long as records (the stream's max age is the job TTL).
type Index struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	stream string
	reads  atomic.Uint64
	// indexed remembers the jobs this process listed lately, so the later
	// changes of a job (running, progress, its end) cost the indexer no
	// read of the job's marker.
	indexed *recent.Map[string, struct{}]
}

// indexedMemory bounds Index.indexed (entries of about 100 bytes).
const indexedMemory = 1 << 16

// NewIndex returns the index on js (Provision returns it).
func NewIndex(js jetstream.JetStream) *Index {
	return &Index{js: js, nc: js.Conn(), stream: StreamIndex, indexed: recent.New[string, struct{}](indexedMemory)}
}

// Reads counts the index requests made so far (tests: a page costs in
// proportion to the page).
func (x *Index) Reads() uint64 { return x.reads.Load() }

func indexBlockSubject(tenant, requester string, block uint64) string {
	return indexPrefix + tenant + "." + requester + "." + strconv.FormatUint(block, 10)
}

func indexScope(tenant, requester string) string {
	return indexPrefix + tenant + "." + requester + ".*"
}

// newest returns the requester's newest entry and its stream sequence;
// found is false when the requester has none.
func (x *Index) newest(ctx context.Context, tenant, requester string) (e IndexEntry, seq uint64, found bool, err error) {
	data, seq, found, err := x.leaderLast(ctx, indexScope(tenant, requester))
	if err != nil || !found {
		return e, 0, false, err
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return e, 0, false, fmt.Errorf("index entry of %s/%s: %w", tenant, requester, err)
	}
	return e, seq, true, nil
}

// leaderLast reads the last message on subject from the stream leader: on
// a cluster a direct get may be answered by a follower that has not yet
// applied the latest append.
func (x *Index) leaderLast(ctx context.Context, subject string) (data []byte, seq uint64, found bool, err error) {
	x.reads.Add(1)
	body, _ := json.Marshal(map[string]string{"last_by_subj": subject})
	m, err := x.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+x.stream, body)
	if err != nil {
		return nil, 0, false, fmt.Errorf("index read: %w: %w", job.ErrUnavailable, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Seq  uint64 `json:"seq"`
			Data []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, 0, false, fmt.Errorf("index read: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, 0, false, nil
		}
		return nil, 0, false, fmt.Errorf("index read: %w", mapErr(resp.Error))
	}
	if resp.Message == nil {
		return nil, 0, false, nil
	}
	return resp.Message.Data, resp.Message.Seq, true, nil
}

// Append adds the job of rec to its requester's index, once. The indexer
// calls it for every record change, not only the creation: with
// one revision kept per key, a job that changed before the relay got to it
// has no creation left in the change log. A marker per job (subject
// <tenant>.<requester>.j.<id>, holding its created_at) tells an indexed job
// at the cost of one read. Concurrent appends for one requester (several
// dispatchers) are ordered by compare-and-set on the requester's newest
// entry; a copy published again within the duplicate window is dropped by
// its message id.
func (x *Index) Append(ctx context.Context, rec *job.Record) error {
	created := rec.CreatedAt.UnixNano()
	stamp := []byte(strconv.FormatInt(created, 10))
	marker := indexPrefix + rec.Tenant + "." + rec.Requester + ".j." + rec.ID
	done := marker + "@" + string(stamp)
	if _, ok := x.indexed.Get(done); ok {
		return nil
	}
	if data, _, found, err := x.leaderLast(ctx, marker); err != nil {
		return err
	} else if found && string(data) == string(stamp) {
		x.indexed.Put(done, struct{}{})
		return nil
	}
	msgID := rec.ID + "." + string(stamp)
	appended := false
	for range 20 {
		last, seq, found, err := x.newest(ctx, rec.Tenant, rec.Requester)
		if err != nil {
			return err
		}
		ord := uint64(0)
		if found {
			if last.ID == rec.ID && last.Created == created {
				appended = true
				break
			}
			ord = last.Ordinal + 1
		}
		data, err := json.Marshal(IndexEntry{Ordinal: ord, ID: rec.ID, Created: created})
		if err != nil {
			return err
		}
		_, err = x.js.Publish(ctx, indexBlockSubject(rec.Tenant, rec.Requester, ord/IndexBlock), data,
			jetstream.WithMsgID(msgID), jetstream.WithExpectLastSequenceForSubject(seq, indexScope(rec.Tenant, rec.Requester)))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			continue // another dispatcher appended meanwhile: take the next ordinal
		}
		if err != nil {
			return fmt.Errorf("index %s: %w", rec.ID, mapErr(err))
		}
		appended = true
		break
	}
	if !appended {
		return fmt.Errorf("index %s: %w: too many concurrent appends", rec.ID, job.ErrUnavailable)
	}
	// The marker goes last: a crash before it costs at most a second entry
	// of the job (pages show it once), never a job left out.
	if _, err := x.js.Publish(ctx, marker, stamp, jetstream.WithMsgID("m."+msgID)); err != nil {
		return fmt.Errorf("index %s: %w", rec.ID, mapErr(err))
	}
	x.indexed.Put(done, struct{}{})
	return nil
}

// Page returns up to n entries of the requester, newest first, with
// ordinals below before (0: from the newest). It reads whole blocks, one
// request each, and stops at the first block that no longer exists (the
// stream ages out the oldest first).
func (x *Index) Page(ctx context.Context, tenant, requester string, before uint64, n int) ([]IndexEntry, error) {
	var newest uint64
	if before == 0 {
		last, _, found, err := x.newest(ctx, tenant, requester)
		if err != nil || !found {
			return nil, err
		}
		before, newest = last.Ordinal+1, last.Ordinal
	}
	var out []IndexEntry
	seen := map[string]bool{}
	for block := (before - 1) / IndexBlock; len(out) < n; block-- {
		var msgs []*nats.Msg
		for try := 0; ; try++ {
			var err error
			msgs, err = x.directGet(ctx, map[string]any{"next_by_subj": indexBlockSubject(tenant, requester, block), "batch": IndexBlock, "no_hdr": true})
			if err != nil {
				return nil, err
			}
			// The leader named the newest entry; a follower answering the
			// direct get may not have it yet (clusters only): ask again.
			if newest == 0 || len(out) > 0 || hasOrdinal(msgs, newest) || try == 50 {
				break
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("index read: %w: %w", job.ErrUnavailable, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
		if len(msgs) == 0 {
			break
		}
		entries := make([]IndexEntry, 0, len(msgs))
		for _, m := range msgs {
			var e IndexEntry
			if json.Unmarshal(m.Data, &e) == nil && e.Ordinal < before {
				entries = append(entries, e)
			}
		}
		slices.SortFunc(entries, func(a, b IndexEntry) int {
			switch {
			case a.Ordinal > b.Ordinal:
				return -1
			case a.Ordinal < b.Ordinal:
				return 1
			}
			return 0
		})
		for _, e := range entries {
			if len(out) == n {
				break
			}
			// A copy of an entry (a relay retry after a crash) shows once.
			key := e.ID + "." + strconv.FormatInt(e.Created, 10)
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, e)
		}
		if block == 0 {
			break
		}
	}
	return out, nil
}

// directGet sends one direct get request to the index stream and collects
// its answers: one message, or a batch ended by an end-of-batch status. No
// message is an empty result, not an error.
func (x *Index) directGet(ctx context.Context, req map[string]any) ([]*nats.Msg, error) {
	x.reads.Add(1)
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	inbox := x.nc.NewRespInbox()
	// A batch is at most IndexBlock messages and its end marker; a channel
	// of that size (SubscribeSync's holds 64k) keeps a read cheap.
	ch := make(chan *nats.Msg, IndexBlock+2)
	sub, err := x.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("index read: %w: %w", job.ErrUnavailable, err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	if err := x.nc.PublishRequest("$JS.API.DIRECT.GET."+x.stream, inbox, body); err != nil {
		return nil, fmt.Errorf("index read: %w: %w", job.ErrUnavailable, err)
	}
	_, batch := req["batch"]
	var out []*nats.Msg
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("index read: %w: %w", job.ErrUnavailable, ctx.Err())
		}
		switch m.Header.Get("Status") {
		case "":
			out = append(out, m)
			if !batch {
				return out, nil
			}
		case "404", "204": // nothing (more): the end
			return out, nil
		case "503":
			return nil, fmt.Errorf("index read: %w: no responders", job.ErrUnavailable)
		default:
			return nil, fmt.Errorf("index read: status %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
		}
	}
}

func hasOrdinal(msgs []*nats.Msg, ord uint64) bool {
	for _, m := range msgs {
		var e IndexEntry
		if json.Unmarshal(m.Data, &e) == nil && e.Ordinal == ord {
			return true
		}
	}
	return false
}

// ConsumerIndexer is the dispatchers' shared durable consumer on the record
// change log that keeps the index. It is the relay's twin, apart from it so
// that its acknowledgements say exactly "indexed": the relay holds some
// changes back (a terminal change's event grace), the indexer never does.
const ConsumerIndexer = "indexer"

// ConsumeIndexChanges binds to (creating or updating) the indexer consumer
// and starts pulling batch changes at a time; every change is to be given
// to Index.Append, then acknowledged.
func (s *Store) ConsumeIndexChanges(ctx context.Context, batch int) (*ChangeLog, error) {
	if s.js == nil {
		return nil, errors.New("change log: store has no JetStream handle")
	}
	cons, err := s.js.CreateOrUpdateConsumer(ctx, jobsStream, jetstream.ConsumerConfig{
		Durable:       ConsumerIndexer,
		Description:   "jobgate indexer: lists every job under its requester (GET /v1/jobs)",
		FilterSubject: JobChanges,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       RelayAckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", ConsumerIndexer, mapErr(err))
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(max(batch, 1)), jetstream.PullExpiry(relayPullExpiry))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", ConsumerIndexer, mapErr(err))
	}
	return &ChangeLog{cons: cons, iter: iter}, nil
}

// IndexProgress is where the indexer stands with the record change log.
type IndexProgress int

const (
	// IndexCaughtUp: every change committed before the call is indexed, so
	// the index holds every job admitted before it.
	IndexCaughtUp IndexProgress = iota
	// IndexBehind: it did not catch up within the wait.
	IndexBehind
	// IndexNeverRan: no indexer consumer exists (no dispatcher ran yet):
	// the index is empty, callers read the records instead.
	IndexNeverRan
)

// WaitForIndex waits (up to wait) until the indexer has handled every record
// change committed before the call.
func (s *Store) WaitForIndex(ctx context.Context, wait time.Duration) (IndexProgress, error) {
	stream, err := s.js.Stream(ctx, jobsStream)
	if err != nil {
		return IndexBehind, mapErr(err)
	}
	committed := stream.CachedInfo().State.LastSeq
	deadline := time.Now().Add(wait)
	for {
		cons, err := stream.Consumer(ctx, ConsumerIndexer)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return IndexNeverRan, nil
		}
		if err != nil {
			return IndexBehind, mapErr(err)
		}
		ci := cons.CachedInfo()
		if ci.AckFloor.Stream >= committed || (ci.NumPending == 0 && ci.NumAckPending == 0) {
			return IndexCaughtUp, nil
		}
		if time.Now().After(deadline) {
			return IndexBehind, nil
		}
		select {
		case <-ctx.Done():
			return IndexBehind, fmt.Errorf("wait for the indexer: %w: %w", job.ErrUnavailable, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
