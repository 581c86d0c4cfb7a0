// Package failpoint injects faults at named places for crash tests, from the
// JOBGATE_FAILPOINTS setting ("gateway.after-commit=exit,renderer.mid-render=exit").
// A process without failpoints pays one nil-map lookup per place.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Actions a failpoint can take.
const (
	ActionExit  = "exit"  // the process exits at once with code 3, as if killed
	ActionError = "error" // the place returns ErrInjected
	ActionPanic = "panic" // the place panics
)

// Names of the places that check a failpoint.
const (
	GatewayAfterCommit = "gateway.after-commit"
	RendererMidRender  = "renderer.mid-render"
)

// ErrInjected is returned where a failpoint's action is "error".
var ErrInjected = errors.New("failpoint: injected error")

// Set is the parsed failpoint configuration. The zero Set is off.
type Set struct {
	points map[string]string
	// Exit is called by ActionExit; os.Exit by default, replaceable by
	// in-process tests that simulate a crash.
	Exit func(code int)
}

// Parse reads "name=action,name=action".
func Parse(spec string) (*Set, error) {
	s := &Set{Exit: os.Exit}
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return s, nil
	}
	s.points = make(map[string]string)
	for _, part := range strings.Split(spec, ",") {
		name, action, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("failpoint %q: want name=action", part)
		}
		switch action {
		case ActionExit, ActionError, ActionPanic:
		default:
			return nil, fmt.Errorf("failpoint %q: unknown action %q (exit, error, panic)", name, action)
		}
		s.points[name] = action
	}
	return s, nil
}

// Hit runs the failpoint called name, if set.
func (s *Set) Hit(name string) error {
	if s == nil || s.points == nil {
		return nil
	}
	switch s.points[name] {
	case ActionExit:
		fmt.Fprintf(os.Stderr, "failpoint %s: exiting\n", name)
		s.Exit(3)
	case ActionError:
		return fmt.Errorf("%s: %w", name, ErrInjected)
	case ActionPanic:
		panic("failpoint " + name)
	}
	return nil
}
