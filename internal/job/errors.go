package job

import "errors"

// ErrInvalidState: a change the state rules forbid (State.CanTransition).
var ErrInvalidState = errors.New("invalid state transition")
