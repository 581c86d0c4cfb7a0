package job

import (
	"fmt"
	"strconv"
	"time"

	"github.com/jobgate/jobgate/internal/canon"
)

// The per-job flow fields of a submission (POST /v1/jobs and each batch
// item): run_at or delay, priority, start_by.

// MaxScheduleAhead is the furthest ahead a job may be scheduled (run_at or
// delay), short of the retention bound a deployment may set lower
// (CheckSchedule).
const MaxScheduleAhead = 30 * 24 * time.Hour

// Flow is a submission's flow fields as given: at most one of RunAt and
// Delay; zero values are absent.
type Flow struct {
	RunAt    *time.Time
	Delay    *time.Duration
	Priority int // 0: absent (the default, 3)
	StartBy  *time.Time
}

// flowMembers are the members of a submission besides type and params.
var flowMembers = map[string]bool{"run_at": true, "delay": true, "priority": true, "start_by": true}

// flowOf reads the flow members of a decoded submission object, with a
// field error per bad one, pointed at it.
func flowOf(top map[string]any) (Flow, []FieldError) {
	var f Flow
	var fe []FieldError
	readTime := func(name string) *time.Time {
		raw, ok := top[name]
		if !ok {
			return nil
		}
		s, isString := raw.(string)
		t, err := time.Parse(time.RFC3339Nano, s)
		if !isString || err != nil {
			fe = append(fe, FieldError{Field: "/" + name, Rule: "format", Message: "must be an RFC 3339 date-time, e.g. 2026-12-05T09:00:00Z"})
			return nil
		}
		t = t.UTC()
		return &t
	}
	f.RunAt = readTime("run_at")
	f.StartBy = readTime("start_by")
	if raw, ok := top["delay"]; ok {
		s, isString := raw.(string)
		d, err := time.ParseDuration(s)
		switch {
		case !isString || err != nil:
			fe = append(fe, FieldError{Field: "/delay", Rule: "format", Message: `must be a duration, e.g. "90s", "15m" or "2h30m"`})
		case d < 0 || d > MaxScheduleAhead:
			fe = append(fe, FieldError{Field: "/delay", Rule: "range", Message: "must be from 0s to 720h (30 days)"})
		default:
			f.Delay = &d
		}
		if _, both := top["run_at"]; both {
			fe = append(fe, FieldError{Field: "/delay", Rule: "oneOf", Message: "give run_at or delay, not both"})
		}
	}
	if raw, ok := top["priority"]; ok {
		n, isNumber := raw.(float64)
		if num, ok := raw.(interface{ String() string }); ok && !isNumber { // json.Number
			v, err := strconv.ParseFloat(num.String(), 64)
			n, isNumber = v, err == nil
		}
		if !isNumber || n != float64(int(n)) || n < 1 || n > 5 {
			fe = append(fe, FieldError{Field: "/priority", Rule: "range", Message: "must be an integer from 1 (first) to 5 (last)"})
		} else {
			f.Priority = int(n)
		}
	}
	if f.RunAt != nil && f.StartBy != nil && f.StartBy.Before(*f.RunAt) {
		fe = append(fe, FieldError{Field: "/start_by", Rule: "range", Message: "must not be before run_at"})
	}
	// A start_by before the run_at a delay resolves to is not refused: it
	// depends on when the request arrives, and a retry of an admitted
	// request must not turn into a 422. Such a job is canceled
	// deadline_exceeded when it comes due.
	return f, fe
}

// canonicalKeys are the flow fields in the canonical form of a request
// (RFC 8785 orders members by name: delay < params < priority < run_at <
// start_by < type). A request without flow fields has the canonical form
// and fingerprint of earlier versions; priority 3, the default, is
// written as absent, as a schema default is applied before fingerprinting.
func (f Flow) appendBefore(b []byte) []byte {
	if f.Delay != nil {
		// The delay as given, normalized ("90s" and "1m30s" are one
		// request), not the run_at it resolves to: a retry of the same
		// request later is the same request.
		b = append(b, `"delay":`...)
		b, _ = canon.AppendCanonical(b, f.Delay.String())
		b = append(b, ',')
	}
	return b
}

func (f Flow) appendAfter(b []byte) []byte {
	if f.Priority != 0 && f.Priority != DefaultPriority {
		b = append(b, `,"priority":`...)
		b = strconv.AppendInt(b, int64(f.Priority), 10)
	}
	if f.RunAt != nil {
		b = append(b, `,"run_at":`...)
		b, _ = canon.AppendCanonical(b, f.RunAt.UTC().Format(time.RFC3339Nano))
	}
	if f.StartBy != nil {
		b = append(b, `,"start_by":`...)
		b, _ = canon.AppendCanonical(b, f.StartBy.UTC().Format(time.RFC3339Nano))
	}
	return b
}

// RunAtFrom is the request's run_at, a delay resolved against admittedAt
// (nil when it has neither).
func (f Flow) RunAtFrom(admittedAt time.Time) *time.Time {
	switch {
	case f.RunAt != nil:
		t := *f.RunAt
		return &t
	case f.Delay != nil:
		t := admittedAt.UTC().Add(*f.Delay)
		return &t
	}
	return nil
}

// CheckSchedule checks the one time-dependent bound of the flow fields at
// admission: run_at at most maxAhead after now (MaxScheduleAhead, or less
// when the deployment's job retention is shorter). A run_at in the past
// is due at once. The bound only grows easier with time, so a retry of an
// admitted request never fails it.
func (f Flow) CheckSchedule(now time.Time, maxAhead time.Duration) error {
	var fe []FieldError
	if f.RunAt != nil && f.RunAt.Sub(now) > maxAhead {
		fe = append(fe, FieldError{Field: "/run_at", Rule: "range", Message: fmt.Sprintf("must be at most %s ahead", maxAhead)})
	}
	if f.Delay != nil && *f.Delay > maxAhead {
		fe = append(fe, FieldError{Field: "/delay", Rule: "range", Message: fmt.Sprintf("must be at most %s", maxAhead)})
	}
	if len(fe) > 0 {
		return validation(fe)
	}
	return nil
}

// Apply sets the flow fields of a record admitted at its CreatedAt: the
// resolved run_at, the priority and start_by. A record whose run_at is
// ahead of its admission starts scheduled.
func (f Flow) Apply(r *Record) {
	r.RunAt = f.RunAtFrom(r.CreatedAt)
	r.Priority = f.Priority
	r.StartBy = f.StartBy
	if r.RunAt != nil && r.RunAt.After(r.CreatedAt) && r.State == StateQueued {
		r.State = StateScheduled
	}
}
