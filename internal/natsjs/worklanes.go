package natsjs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkLanes reads one job type's work per lane, a lane being the work of
// one requester of one tenant (the subjects jobgate.work.<type>.<tenant>.
// <requester>.>), with no consumer at all: a direct get of a lane's oldest
// message from a sequence on, a listing of the lanes with work, and the
// core-NATS notices of new work. JetStream caps a stream at 1,000
// consumers, so a consumer per requester stalls a deployment with more
// requesters than that; reads cost no server state.
type WorkLanes struct {
	js     jetstream.JetStream
	stream *streamRef
	typ    string
}

// LaneMsg is one work message as read from its lane.
type LaneMsg struct {
	Seq               uint64
	Key               string // the job's record key
	Tenant, Requester string
	// Priority is the job's priority as its subject names it (1 to 5,
	// job.DefaultPriority when it names none).
	Priority int
	// Last: the last message of a batch read that matched the read's
	// filter when it was read (none after it). False when the read cannot
	// tell (a single get, a server without batch reads).
	Last bool
	// Event is the stream sequence of the job's newest event as the
	// message's publisher knew it; 0: unknown.
	Event uint64
	// Rec is the job's record as it was when the message was published
	// (nil: the message names only the key).
	Rec *job.Record
	// Size is the message's data in bytes.
	Size int
}

// Lanes returns the lanes of typ's work.
func (q *WorkQueue) Lanes(typ string) *WorkLanes {
	return &WorkLanes{js: q.js, stream: q.stream, typ: typ}
}

// List returns the tenants with work of the type, each with its requesters
// with work, and the stream's last sequence: one subject a queued job, so
// its cost grows with the backlog (the caller bounds how often it lists).
func (l *WorkLanes) List(ctx context.Context) (map[string]map[string]bool, uint64, error) {
	with, last, err := l.ListPriorities(ctx)
	if err != nil {
		return nil, 0, err
	}
	out := make(map[string]map[string]bool, len(with))
	for tenant, requesters := range with {
		out[tenant] = make(map[string]bool, len(requesters))
		for requester := range requesters {
			out[tenant][requester] = true
		}
	}
	return out, last, nil
}

// Priorities is a set of priorities, bit p for priority p (1 to 5).
type Priorities uint8

// Has says whether p is in the set.
func (ps Priorities) Has(p int) bool { return ps&(1<<p) != 0 }

// ListPriorities is List with the priorities each lane has work of.
func (l *WorkLanes) ListPriorities(ctx context.Context) (map[string]map[string]Priorities, uint64, error) {
	s, err := l.stream.get(ctx)
	if err != nil {
		return nil, 0, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(TypeWork(l.typ)))
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	with := map[string]map[string]Priorities{}
	for subj := range info.State.Subjects {
		if tenant, requester, _, prio, ok := workScopeOf(subj); ok {
			if with[tenant] == nil {
				with[tenant] = map[string]Priorities{}
			}
			with[tenant][requester] |= 1 << prio
		}
	}
	return with, info.State.LastSeq, nil
}

// LastSeq is the work stream's last sequence (a listing is worth its cost
// only when it moved).
func (l *WorkLanes) LastSeq(ctx context.Context) (uint64, error) {
	s, err := l.stream.get(ctx)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	return info.State.LastSeq, nil
}

// Oldest returns the lane's first message at or after sequence from, or
// nil when it has none.
func (l *WorkLanes) Oldest(ctx context.Context, tenant, requester string, from uint64) (*LaneMsg, error) {
	return l.get(ctx, max(from, 1), RequesterWork(l.typ, tenant, requester))
}

// OldestBatch returns up to n of the lane's messages at or after sequence
// from, oldest first, in one direct get: at least one when the lane has
// any, and past the first no more than maxBytes of message data. None:
// the lane has no message from there.
func (l *WorkLanes) OldestBatch(ctx context.Context, tenant, requester string, from uint64, n, maxBytes int) ([]*LaneMsg, error) {
	return l.oldestBatch(ctx, RequesterWork(l.typ, tenant, requester), from, n, maxBytes)
}

// OldestBatchAt is OldestBatch of the lane's messages of one priority
// (1 to 5, see WorkSubjectOf).
func (l *WorkLanes) OldestBatchAt(ctx context.Context, tenant, requester string, priority int, from uint64, n, maxBytes int) ([]*LaneMsg, error) {
	return l.oldestBatch(ctx, priorityWork(l.typ, tenant, requester, priority), from, n, maxBytes)
}

func (l *WorkLanes) oldestBatch(ctx context.Context, filter string, from uint64, n, maxBytes int) ([]*LaneMsg, error) {
	s, err := l.stream.get(ctx)
	if err != nil {
		return nil, err
	}
	// Batches are direct gets only; a stream on a cluster is read from
	// its leader (its followers may be behind), one message a request.
	if n <= 1 || !s.CachedInfo().Config.AllowDirect {
		m, err := l.get(ctx, max(from, 1), filter)
		if m == nil || err != nil {
			return nil, err
		}
		return []*LaneMsg{m}, nil
	}
	nc := l.js.Conn()
	// A channel of the batch's size: SubscribeSync's would be the
	// connection's default pending limit, half a megabyte a read.
	replies := make(chan *nats.Msg, n+2)
	sub, err := nc.ChanSubscribe(nats.NewInbox(), replies)
	if err != nil {
		return nil, fmt.Errorf("read work: %w", mapErr(err))
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(struct {
		Seq      uint64 `json:"seq"`
		NextFor  string `json:"next_by_subj"`
		Batch    int    `json:"batch"`
		MaxBytes int    `json:"max_bytes,omitempty"`
	}{max(from, 1), filter, n, maxBytes})
	if err := nc.PublishRequest(directGetPrefix+StreamWork, sub.Subject, req); err != nil {
		return nil, fmt.Errorf("read work: %w", mapErr(err))
	}
	var out []*LaneMsg
	for len(out) <= n {
		var m *nats.Msg
		select {
		case m = <-replies:
		case <-ctx.Done():
			return nil, fmt.Errorf("read work: %w", mapErr(ctx.Err()))
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // the batch's end
			return out, nil
		case "404":
			return out, nil // nothing from there
		case "503":
			return nil, fmt.Errorf("read work: %w", mapErr(nats.ErrNoResponders))
		default:
			return nil, fmt.Errorf("read work: direct get answered %s %s", status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("read work: a direct get reply without its sequence")
		}
		out = append(out, laneMsgOf(seq, m.Header.Get(jetstream.SubjectHeader), m.Header, m.Data))
		// A batch's messages say how many more match; a server without
		// batch reads (before 2.11) answers one message that does not.
		if pending := m.Header.Get(numPendingHeader); pending == "" || pending == "0" {
			out[len(out)-1].Last = pending == "0"
			return out, nil
		}
	}
	return out, nil
}

const numPendingHeader = "Nats-Num-Pending"

// directGetPrefix is the subject of a stream's direct gets, but for the
// stream's name.
const directGetPrefix = "$JS.API.DIRECT.GET."

// At returns the message at seq, or nil when it is gone.
func (l *WorkLanes) At(ctx context.Context, seq uint64) (*LaneMsg, error) {
	return l.get(ctx, seq, "")
}

func (l *WorkLanes) get(ctx context.Context, seq uint64, filter string) (*LaneMsg, error) {
	s, err := l.stream.get(ctx)
	if err != nil {
		return nil, err
	}
	var opts []jetstream.GetMsgOpt
	if filter != "" {
		opts = append(opts, jetstream.WithGetMsgSubject(filter))
	}
	m, err := s.GetMsg(ctx, seq, opts...)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read work: %w", mapErr(err))
	}
	if filter == "" && !strings.HasPrefix(m.Subject, TypeWork(l.typ)[:len(TypeWork(l.typ))-1]) {
		return nil, nil // another type's message at that sequence
	}
	return laneMsgOf(m.Sequence, m.Subject, m.Header, m.Data), nil
}

// laneMsgOf reads a work message: its job's key and lane, and the record
// and event it carries when it carries them.
func laneMsgOf(seq uint64, subject string, h nats.Header, data []byte) *LaneMsg {
	msg := &LaneMsg{Seq: seq, Size: len(data)}
	if v := h.Get(workEventHeader); v != "" {
		msg.Event, _ = strconv.ParseUint(v, 10, 64)
	}
	rev, err := strconv.ParseUint(h.Get(workRevisionHeader), 10, 64)
	holdsRecord := err == nil && rev > 0
	t, q, id, prio, ok := workScopeOf(subject)
	msg.Priority = prio
	if dt, dq, did, dok := ScopeOf(string(data)); dok && !holdsRecord {
		msg.Key, msg.Tenant, msg.Requester = job.StoreKey(dt, dq, did), dt, dq
	} else if ok {
		msg.Key, msg.Tenant, msg.Requester = job.StoreKey(t, q, id), t, q
		// The record, if it is the subject's job's (the subject is what
		// the stream's permissions and the lanes go by).
		if holdsRecord {
			if rec, err := codec.UnmarshalRecord(data, rev); err == nil && rec.Tenant == t && rec.Requester == q && rec.ID == id {
				msg.Rec = rec
			}
		}
	}
	return msg
}

// Remove deletes a work message that no job needs any more; one already
// gone is not an error.
//
// It is one JetStream API request a job: the request is written and its
// answer checked here rather than through jetstream.Stream.DeleteMsg, whose
// decoding of every "success" answer with encoding/json cost 2.6% of the
// pipeline's CPU.
func (l *WorkLanes) Remove(ctx context.Context, seq uint64) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	req := strconv.AppendUint([]byte(`{"seq":`), seq, 10)
	req = append(req, `,"no_erase":true}`...)
	m, err := l.js.Conn().RequestWithContext(ctx, msgDeletePrefix+StreamWork, req)
	if err != nil {
		return fmt.Errorf("remove work %d: %w", seq, mapErr(err))
	}
	if err := removeAnswer(m.Data); err != nil {
		return fmt.Errorf("remove work %d: %w", seq, mapErr(err))
	}
	return nil
}

const (
	msgDeletePrefix = "$JS.API.STREAM.MSG.DELETE."
	jsErrNoMessage  = 10037 // JSNoMessageFoundErr
)

var removeSucceeded = []byte(`"success":true`)

// removeAnswer reads the answer to a message delete: nil for a success or
// a message already gone, the API's error otherwise.
func removeAnswer(data []byte) error {
	if bytes.Contains(data, removeSucceeded) {
		return nil
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return fmt.Errorf("undecodable answer: %w", err)
	}
	if resp.Error == nil {
		return errors.New("answer is neither a success nor an error")
	}
	// A message already gone is answered "no message found", under the
	// delete's failure code (10057) rather than its own.
	if resp.Error.ErrorCode == jsErrNoMessage || strings.Contains(resp.Error.Description, "no message found") {
		return nil
	}
	return resp.Error
}

// Notices calls fn with the lane and priority of every work message published from now
// on (a core subscription to the type's work subjects: a notice may come a
// moment before the message is stored, and none comes while the
// connection is down, so listings stay the backstop).
func (l *WorkLanes) Notices(fn func(tenant, requester string, priority int)) (func(), error) {
	sub, err := l.js.Conn().Subscribe(TypeWork(l.typ), func(m *nats.Msg) {
		if tenant, requester, _, prio, ok := workScopeOf(m.Subject); ok {
			fn(tenant, requester, prio)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("work notices of %s: %w", l.typ, err)
	}
	_ = sub.SetPendingLimits(1<<20, 64<<20)
	return func() { _ = sub.Unsubscribe() }, nil
}

// RemoveConsumers deletes the type's work consumers of earlier versions
// (one per type, tenant or requester): they count against the stream's
// consumer cap and would hold messages delivered to nobody.
func (l *WorkLanes) RemoveConsumers(ctx context.Context) (int, error) {
	s, err := l.stream.get(ctx)
	if err != nil {
		return 0, err
	}
	names := s.ConsumerNames(ctx)
	var stale []string
	for name := range names.Name() {
		if name == WorkConsumerName(l.typ) || strings.HasPrefix(name, WorkConsumerName(l.typ)+"-") ||
			strings.HasPrefix(name, requesterConsumerPre+l.typ+"-") {
			stale = append(stale, name)
		}
	}
	if err := names.Err(); err != nil {
		return 0, fmt.Errorf("list work consumers: %w", mapErr(err))
	}
	for _, name := range stale {
		if err := s.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return 0, fmt.Errorf("remove consumer %s: %w", name, mapErr(err))
		}
	}
	return len(stale), nil
}

// A job's priority (job.Record.Priority, 1 first to 5 last) is in its work
// message's subject: the default, 3, as every message of earlier versions
// (jobgate.work.<type>.<tenant>.<requester>.<id>), any other as one more
// token before the id (….<requester>.<priority>.<id>). A lane's messages of
// one priority are then one subject filter, read in order by direct gets
// like the whole lane, so taking the best priority first costs a read per
// priority that has work, and a deployment that sets no priority reads
// exactly as before. The priority comes before the id so that its filter,
// like the default's, ends in its wildcard: the server answers a batched
// read with the count of the filter's messages still waiting, and a
// wildcard before the last token (….<requester>.*.<priority>, the layout
// before) had it match every job subject of the lane, a cost that grew
// with the lane (docs/performance.md, Flow control).

// WorkSubjectOf is the subject of r's work message.
func WorkSubjectOf(r *job.Record) string {
	if p := r.PriorityOr(); p != job.DefaultPriority && p >= 1 && p <= 5 {
		return laneSubject(r.Type, r.Tenant, r.Requester) + strconv.Itoa(p) + "." + r.ID
	}
	return WorkSubject(r.Type, r.Tenant, r.Requester, r.ID)
}

// priorityWork matches a lane's messages of priority p.
func priorityWork(typ, tenant, requester string, p int) string {
	lane := laneSubject(typ, tenant, requester)
	if p == job.DefaultPriority {
		return lane + "*"
	}
	return lane + strconv.Itoa(p) + ".*"
}

// workScopeOf splits a work subject into its job's scope and priority. It
// runs for every notice and every message read, so it cuts the subject in
// place rather than building the default layout's to parse.
func workScopeOf(subj string) (tenant, requester, id string, priority int, ok bool) {
	rest, isWork := strings.CutPrefix(subj, workPrefix)
	if !isWork || strings.Count(rest, ".") != 4 {
		tenant, requester, id, ok = ScopeOf(subj)
		return tenant, requester, id, job.DefaultPriority, ok
	}
	// <type>.<tenant>.<requester>.<priority>.<id>
	var tok [5]string
	for i := range 4 {
		tok[i], rest, _ = strings.Cut(rest, ".")
	}
	tok[4] = rest
	p := tok[3]
	if tok[0] == "" || tok[1] == "" || tok[2] == "" || tok[4] == "" || len(p) != 1 || p[0] < '1' || p[0] > '5' || p[0] == '3' {
		return "", "", "", 0, false
	}
	return tok[1], tok[2], tok[4], int(p[0] - '0'), true
}
