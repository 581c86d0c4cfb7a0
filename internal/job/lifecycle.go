package job

import (
	"fmt"
	"time"
)

// The lifecycle of a job, move by move. Every component that writes a record
// (the gateway, the workers, the dispatcher's sweeper) changes it only
// through these methods, each a legal move of the state machine in state.go,
// and then writes it by compare-and-set; so the rules are read here, once.

// AttemptsOr is the job's attempt limit, or def for a record that carries
// none.
func (r *Record) AttemptsOr(def int) int {
	if r.MaxAttempts > 0 {
		return r.MaxAttempts
	}
	return def
}

// TimeoutOr is the job's attempt budget, or def for a record that carries
// none.
func (r *Record) TimeoutOr(def time.Duration) time.Duration {
	if r.TimeoutSeconds > 0 {
		return time.Duration(r.TimeoutSeconds) * time.Second
	}
	return def
}

// LastSign is the last sign of life of a running record's worker.
func (r *Record) LastSign() time.Time {
	if r.HeartbeatAt != nil {
		return *r.HeartbeatAt
	}
	return r.UpdatedAt
}

// Claim starts a new attempt under worker: queued, or running between
// attempts, or running under a worker the caller judged gone, becomes
// running with attempt+1. Taking a job over from a vanished worker records
// that attempt's verdict as worker_lost. Progress starts empty.
func (r *Record) Claim(worker string, now time.Time) error {
	if worker == "" {
		return fmt.Errorf("%w: claim needs a worker", ErrInvalidState)
	}
	prevWorker := r.Worker
	if err := r.Transition(StateRunning, now); err != nil {
		return err
	}
	now = now.UTC()
	if prevWorker != "" {
		r.Error = WorkerLost(r)
		r.endAttempt(OutcomeWorkerLost, r.Error, now)
	}
	r.Attempt++
	r.Worker, r.ClaimID, r.Place = worker, "", ""
	r.HeartbeatAt = &now
	r.RetryAt = nil
	r.Progress = nil
	r.startAttempt(worker, now)
	return nil
}

// Reassign hands a claim that never reached a worker to worker instead:
// the same attempt, started again now. Only the broker that wrote the
// claim may judge that (its answer was lost, so it sent no assignment).
func (r *Record) Reassign(worker string, now time.Time) error {
	if worker == "" || r.State != StateRunning || r.Worker == "" {
		return fmt.Errorf("%w: only a running job's claim can be reassigned", ErrInvalidState)
	}
	now = now.UTC()
	r.Worker = worker
	r.HeartbeatAt = &now
	r.UpdatedAt = now
	if a := r.openAttempt(); a != nil {
		a.Worker = clipMessage(worker)
		a.StartedAt = now
	}
	return nil
}

// PlaceHolder is the name the claim's concurrency places are held under:
// Place, else ClaimID ("": the record holds no claim's places).
func (r *Record) PlaceHolder() string {
	if r.Place != "" {
		return r.Place
	}
	return r.ClaimID
}

// EndClaim forgets the claim of an attempt whose verdict is being written:
// its broker gives back (or hands on) its places, and nobody who later
// meets the ended job gives them again.
func (r *Record) EndClaim() { r.ClaimID, r.Place = "", "" }

// Release gives a running job back without a verdict (its worker is
// stopping): the attempt does not count against the job's cause, and the
// next attempt is due at once.
func (r *Record) Release(now time.Time) error {
	return r.release(OutcomeWorkerLost, now)
}

// release ends the running attempt without a verdict, recorded as outcome.
func (r *Record) release(outcome string, now time.Time) error {
	if r.State != StateRunning {
		return &TransitionError{From: r.State, To: StateRunning}
	}
	now = now.UTC()
	r.endAttempt(outcome, nil, now)
	r.Worker, r.ClaimID, r.Place = "", "", ""
	r.RetryAt = &now
	r.HeartbeatAt = &now
	r.UpdatedAt = now
	return nil
}

// GiveBack is Release by the job's own worker, which ran the attempt to no
// verdict through no fault of the job (a store outage, its process
// stopping): the attempt is counted as given back and does not use up one
// of the job's attempts (AttemptsUsed), so an outage of any length delays a
// job and never fails it. Attempt numbers still only grow. A worker that
// vanished is released by the dispatcher with Release: its attempt counts,
// so a job that kills its workers still runs out of attempts.
func (r *Record) GiveBack(now time.Time) error {
	if err := r.release(OutcomeGivenBack, now); err != nil {
		return err
	}
	if r.GivenBack < r.Attempt {
		r.GivenBack++
	}
	return nil
}

// AttemptsUsed is how many of the job's attempts are used up: those
// started, less those given back by their worker without a verdict.
func (r *Record) AttemptsUsed() int { return r.Attempt - r.GivenBack }

// ScheduleRetry ends a failed attempt that will be tried again at at: the
// job stays running, without a worker, with the attempt's cause recorded.
func (r *Record) ScheduleRetry(f *Failure, at, now time.Time) error {
	if r.State != StateRunning {
		return &TransitionError{From: r.State, To: StateRunning}
	}
	now, at = now.UTC(), at.UTC()
	r.endAttempt(OutcomeFailed, f, now)
	r.Worker, r.ClaimID, r.Place = "", "", ""
	r.RetryAt = &at
	r.HeartbeatAt = &now
	r.UpdatedAt = now
	r.Error = f
	return nil
}

// Heartbeat records that the running attempt is alive.
func (r *Record) Heartbeat(now time.Time) {
	now = now.UTC()
	r.HeartbeatAt = &now
	r.UpdatedAt = now
}

// SetProgress records how far the running attempt is; it is a heartbeat too.
func (r *Record) SetProgress(p Progress, now time.Time) {
	r.Progress = &p
	r.Heartbeat(now)
}

// Succeed finishes the job with its stored result.
func (r *Record) Succeed(out *Output, now time.Time) error {
	if err := r.Transition(StateSucceeded, now); err != nil {
		return err
	}
	r.endAttempt(OutcomeSucceeded, nil, *r.FinishedAt)
	r.Output = out
	r.Error = nil
	r.HeartbeatAt = r.FinishedAt
	if r.Progress != nil && r.Progress.Total > 0 {
		r.Progress.Done = r.Progress.Total
	}
	return nil
}

// Fail ends the job with f.
func (r *Record) Fail(f *Failure, now time.Time) error {
	if err := r.Transition(StateFailed, now); err != nil {
		return err
	}
	outcome := OutcomeFailed
	if f != nil && f.Category == CategoryWorkerLost {
		outcome = OutcomeWorkerLost
	}
	r.endAttempt(outcome, f, *r.FinishedAt)
	r.Error = f
	return nil
}

// Expire fails a job still queued or running when its record's retention
// is about to end: a record is never deleted while its job is open. The
// failure is a new write, which restarts the record's age, so the key goes
// on protecting the failed job for a whole retention.
func (r *Record) Expire(retention time.Duration, now time.Time) error {
	if r.State != StateScheduled && r.State != StateQueued && r.State != StateRunning {
		return &TransitionError{From: r.State, To: StateFailed}
	}
	was := r.State
	return r.Fail(&Failure{Category: CategoryExpired,
		Message: fmt.Sprintf("the job was still %s when its retention (%s) was about to end", was, retention)}, now)
}

// Due makes a scheduled job queued: its run_at has come, or an admin
// asked for it to run now. Nothing else changes, so the move is a plain
// compare-and-set of the stored version.
func (r *Record) Due(now time.Time) error {
	if r.State != StateScheduled {
		return &TransitionError{From: r.State, To: StateQueued}
	}
	return r.Transition(StateQueued, now)
}

// MissedStart reports whether the job has a start_by that passed at now
// before any attempt started.
func (r *Record) MissedStart(now time.Time) bool {
	return r.StartBy != nil && r.Attempt == 0 && now.After(*r.StartBy) &&
		(r.State == StateScheduled || r.State == StateQueued)
}

// CancelDeadline cancels a job that no attempt started by its start_by,
// with the error category deadline_exceeded (its resource shows it).
func (r *Record) CancelDeadline(now time.Time) error {
	if !r.MissedStart(now) {
		return fmt.Errorf("%w: the job has no start_by that passed before it started", ErrInvalidState)
	}
	if err := r.Transition(StateCanceled, now); err != nil {
		return err
	}
	r.Error = &Failure{Category: CategoryDeadline,
		Message: "no attempt had started by the job's start_by, " + r.StartBy.UTC().Format(time.RFC3339)}
	return nil
}

// RetentionStart is when the job's retention is counted from: its
// admission, or its run_at for a job scheduled ahead (a scheduled job is
// not failed expired for the time it was meant to wait).
func (r *Record) RetentionStart() time.Time {
	if r.RunAt != nil && r.RunAt.After(r.CreatedAt) {
		return *r.RunAt
	}
	return r.CreatedAt
}

// Cancel ends a scheduled, queued or running job at its requester's wish.
func (r *Record) Cancel(now time.Time) error {
	if err := r.Transition(StateCanceled, now); err != nil {
		if r.State.Terminal() {
			return Userf(ErrTerminal, "the job is already %s", r.State)
		}
		return err
	}
	r.endAttempt(OutcomeCanceled, nil, *r.FinishedAt)
	return nil
}
