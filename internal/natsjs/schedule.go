package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The scheduled set: one small entry per job admitted with a run_at still
// ahead, on the subject of the minute its run_at falls in
// (jobgate.schedule.<unix minute>). Nothing of it lives in a process's
// memory: a waker asks the stream for the minutes that hold entries up to
// now (a subject count, at most one per minute of the 30 days a run_at may
// lie ahead), reads a due minute's entries by sequence (a direct get by
// subject), and deletes each entry once its job is no longer scheduled. The
// job record stays the truth: an entry only says when to look at it, so a
// lost entry delete or a duplicate entry costs a read and nothing else.
//
// Why not nats-server's own message schedules (Nats-Schedule, ADR-51):
// the server keeps every pending schedule in memory (a map entry and a
// timer wheel slot per schedule subject), which is memory per scheduled
// job in the server process; a minute bucket costs one subject.

// ScheduleEntry is one scheduled job as its entry names it: when its
// run_at comes (RunAt), or, with Renew, when its record is to be written
// again so that it outlives a wait longer than half the job retention
// (the record bucket drops a record its retention after its last write).
type ScheduleEntry struct {
	Seq   uint64    `json:"-"` // the entry's stream sequence
	Key   string    `json:"key"`
	RunAt time.Time `json:"run_at"`
	Renew bool      `json:"renew,omitempty"`
}

// Schedule is the JOBGATE_SCHEDULE stream as the services see it. Its
// errors wrap job.ErrUnavailable and job.ErrStorageFull.
type Schedule struct {
	js     jetstream.JetStream
	stream *streamRef
}

// NewSchedule returns the scheduled set on js (Provision returns one).
func NewSchedule(js jetstream.JetStream) *Schedule {
	return &Schedule{js: js, stream: newStreamRef(js, StreamSchedule)}
}

// ScheduleMinute is the bucket of a run_at: its Unix minute.
func ScheduleMinute(t time.Time) int64 { return t.Unix() / 60 }

// scheduleSubject is the subject of a minute's entries.
func scheduleSubject(minute int64) string {
	return schedulePrefix + strconv.FormatInt(minute, 10)
}

// Add stores r's entry. It carries no Nats-Msg-Id on purpose: the
// server would keep the id in memory for the duplicate window (about 200
// bytes a job, measured), and a duplicate entry (the relay adding one
// admission twice after a redelivery) costs only a read: the waker deletes
// an entry whose job is no longer scheduled.
func (s *Schedule) Add(ctx context.Context, r *job.Record) error {
	if r.RunAt == nil {
		return fmt.Errorf("schedule %s: %w: no run_at", r.ID, job.ErrInvalidState)
	}
	return s.add(ctx, r.ID, ScheduleEntry{Key: r.Key(), RunAt: r.RunAt.UTC()})
}

// AddRenewal stores an entry that has r's record written again at at.
func (s *Schedule) AddRenewal(ctx context.Context, r *job.Record, at time.Time) error {
	return s.add(ctx, r.ID, ScheduleEntry{Key: r.Key(), RunAt: at.UTC(), Renew: true})
}

func (s *Schedule) add(ctx context.Context, id string, e ScheduleEntry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", id, err)
	}
	msg := &nats.Msg{Subject: scheduleSubject(ScheduleMinute(e.RunAt)), Data: data}
	if err := publishOnce(ctx, s.js, msg); err != nil {
		return fmt.Errorf("schedule %s: %w", id, mapErr(err))
	}
	return nil
}

// Minutes lists the minutes up to last (inclusive) that hold entries,
// oldest first.
func (s *Schedule) Minutes(ctx context.Context, last int64) ([]int64, error) {
	st, err := s.stream.get(ctx)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(schedulePrefix+">"))
	if err != nil {
		return nil, fmt.Errorf("scheduled minutes: %w", mapErr(err))
	}
	var out []int64
	for subj := range info.State.Subjects {
		m, err := strconv.ParseInt(strings.TrimPrefix(subj, schedulePrefix), 10, 64)
		if err == nil && m <= last {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// Next returns the first entry of minute stored after sequence after, or
// nil when there is none.
func (s *Schedule) Next(ctx context.Context, minute int64, after uint64) (*ScheduleEntry, error) {
	st, err := s.stream.get(ctx)
	if err != nil {
		return nil, err
	}
	m, err := st.GetMsg(ctx, after+1, jetstream.WithGetMsgSubject(scheduleSubject(minute)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read scheduled minute %d: %w", minute, mapErr(err))
	}
	e := &ScheduleEntry{Seq: m.Sequence}
	if err := json.Unmarshal(m.Data, e); err != nil || e.Key == "" {
		// Not an entry this version wrote: nothing to wake; the caller
		// deletes it like a settled one.
		return &ScheduleEntry{Seq: m.Sequence}, nil
	}
	return e, nil
}

// Remove deletes the entry at seq; one already gone is not an error.
func (s *Schedule) Remove(ctx context.Context, seq uint64) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	req := strconv.AppendUint([]byte(`{"seq":`), seq, 10)
	req = append(req, `,"no_erase":true}`...)
	m, err := s.js.Conn().RequestWithContext(ctx, msgDeletePrefix+StreamSchedule, req)
	if err != nil {
		return fmt.Errorf("remove scheduled entry %d: %w", seq, mapErr(err))
	}
	if err := removeAnswer(m.Data); err != nil {
		return fmt.Errorf("remove scheduled entry %d: %w", seq, mapErr(err))
	}
	return nil
}

// Depth is the number of entries stored: the scheduled jobs, give or take
// entries of jobs run early or canceled that no waker has deleted yet.
func (s *Schedule) Depth(ctx context.Context) (uint64, error) {
	st, err := s.stream.get(ctx)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("scheduled depth: %w", mapErr(err))
	}
	return info.State.Msgs, nil
}
