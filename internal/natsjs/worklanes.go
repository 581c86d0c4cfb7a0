package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	// Event is the stream sequence of the job's newest event as the
	// message's publisher knew it; 0: unknown.
	Event uint64
	// Rec is the job's record as it was when the message was published
	// (nil: the message names only the key).
	Rec *job.Record
}

// Lanes returns the lanes of typ's work.
func (q *WorkQueue) Lanes(typ string) *WorkLanes {
	return &WorkLanes{js: q.js, stream: q.stream, typ: typ}
}

// List returns the tenants with work of the type, each with its requesters
// with work, and the stream's last sequence: one subject a queued job, so
// its cost grows with the backlog (the caller bounds how often it lists).
func (l *WorkLanes) List(ctx context.Context) (map[string]map[string]bool, uint64, error) {
	s, err := l.stream.get(ctx)
	if err != nil {
		return nil, 0, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(TypeWork(l.typ)))
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	with := map[string]map[string]bool{}
	for subj := range info.State.Subjects {
		if tenant, requester, _, ok := ScopeOf(subj); ok {
			if with[tenant] == nil {
				with[tenant] = map[string]bool{}
			}
			with[tenant][requester] = true
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
	msg := &LaneMsg{Seq: m.Sequence}
	if v := m.Header.Get(workEventHeader); v != "" {
		msg.Event, _ = strconv.ParseUint(v, 10, 64)
	}
	rev, err := strconv.ParseUint(m.Header.Get(workRevisionHeader), 10, 64)
	holdsRecord := err == nil && rev > 0
	if t, q, id, ok := ScopeOf(string(m.Data)); ok && !holdsRecord {
		msg.Key, msg.Tenant, msg.Requester = job.StoreKey(t, q, id), t, q
	} else if t, q, id, ok := ScopeOf(m.Subject); ok {
		msg.Key, msg.Tenant, msg.Requester = job.StoreKey(t, q, id), t, q
		// The record, if it is the subject's job's (the subject is what
		// the stream's permissions and the lanes go by).
		if holdsRecord {
			if rec, err := job.UnmarshalRecord(m.Data, rev); err == nil && rec.Tenant == t && rec.Requester == q && rec.ID == id {
				msg.Rec = rec
			}
		}
	}
	return msg, nil
}

// Remove deletes a work message that no job needs any more; one already
// gone is not an error.
func (l *WorkLanes) Remove(ctx context.Context, seq uint64) error {
	s, err := l.stream.get(ctx)
	if err != nil {
		return err
	}
	if err := s.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) &&
		!strings.Contains(err.Error(), "no message found") {
		return fmt.Errorf("remove work %d: %w", seq, mapErr(err))
	}
	return nil
}

// Notices calls fn with the lane of every work message published from now
// on (a core subscription to the type's work subjects: a notice may come a
// moment before the message is stored, and none comes while the
// connection is down, so listings stay the backstop).
func (l *WorkLanes) Notices(fn func(tenant, requester string)) (func(), error) {
	sub, err := l.js.Conn().Subscribe(TypeWork(l.typ), func(m *nats.Msg) {
		if tenant, requester, _, ok := ScopeOf(m.Subject); ok {
			fn(tenant, requester)
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
