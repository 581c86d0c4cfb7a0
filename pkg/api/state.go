package api

// State is where a job is in its life. It only moves forward:
// scheduled → queued → running → succeeded | failed, and canceled from
// scheduled, queued or running.
type State string

const (
	StateScheduled State = "scheduled" // admitted with a run_at still ahead
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCanceled  State = "canceled"
)

// Valid reports whether s is one of the six known states.
func (s State) Valid() bool {
	switch s {
	case StateScheduled, StateQueued, StateRunning, StateSucceeded, StateFailed, StateCanceled:
		return true
	}
	return false
}

// Terminal reports whether no further transition can leave s.
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCanceled
}

// CanTransition reports whether a job may move from s to next. Staying in
// running is allowed: a new attempt or a progress checkpoint is a change of
// the job, not of its state.
func (s State) CanTransition(next State) bool {
	switch s {
	case StateScheduled:
		// failed: only when its retention is about to end (expired).
		return next == StateQueued || next == StateCanceled || next == StateFailed
	case StateQueued:
		return next == StateRunning || next == StateCanceled || next == StateFailed
	case StateRunning:
		return next == StateRunning || next == StateSucceeded || next == StateFailed || next == StateCanceled
	}
	return false
}
