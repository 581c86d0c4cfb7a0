package schema

import (
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
)

// ParamsSchema is a compiled params schema: it validates params decoded by
// canon.DecodeStrict and returns them with the schema's defaults applied,
// or at most api.MaxFieldErrors problems.
type ParamsSchema interface {
	Apply(params any) (any, *api.ValidationError)
}

// Types is what a decoder needs of the declared types: the compiled schema
// of a type by name.
type Types interface {
	Schema(typeName string) (ParamsSchema, bool)
}

// Registry is the set of declared types' compiled schemas, by type name. It
// implements Types. Reads (every submission) take no lock: writers
// (a watch on the declarations) replace an immutable map. The schemas it
// hands out validate costly params through its gate (gate.go): at most a
// few at once in the process, each within a deadline. The zero value is an
// empty registry without a gate.
type Registry struct {
	mu      sync.Mutex // serializes writers
	schemas atomic.Pointer[map[string]*gated]
	gate    *gate
}

var _ Types = (*Registry)(nil)

// NewRegistry returns an empty registry whose schemas validate costly
// params at most max(1, GOMAXPROCS/2) at a time, each within
// ValidationDeadline.
func NewRegistry() *Registry {
	return &Registry{gate: newGate(max(1, runtime.GOMAXPROCS(0)/2), ValidationDeadline)}
}

func (r *Registry) load() map[string]*gated {
	if m := r.schemas.Load(); m != nil {
		return *m
	}
	return nil
}

// Set declares (or replaces) the schema of a type; a nil schema deletes it.
func (r *Registry) Set(name string, s *Schema) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := maps.Clone(r.load())
	if next == nil {
		next = map[string]*gated{}
	}
	if s == nil {
		delete(next, name)
	} else {
		next[name] = &gated{s: s, gate: r.gate}
	}
	r.schemas.Store(&next)
}

// Delete forgets a type.
func (r *Registry) Delete(name string) { r.Set(name, nil) }

// Lookup returns the compiled schema of a type.
func (r *Registry) Lookup(name string) (*Schema, bool) {
	g, ok := r.load()[name]
	if !ok {
		return nil, false
	}
	return g.s, true
}

// Schema implements Types: the type's schema, validating through the
// registry's gate.
func (r *Registry) Schema(name string) (ParamsSchema, bool) {
	g, ok := r.load()[name]
	if !ok {
		return nil, false // not a typed nil in the interface
	}
	return g, true
}

// Names lists the declared types, sorted.
func (r *Registry) Names() []string { return slices.Sorted(maps.Keys(r.load())) }

// gated is a registered schema: its costly validations pass the gate.
type gated struct {
	s    *Schema
	gate *gate
}

// Apply is Schema.Apply, with validations that cost more than inlineCost
// run through the gate.
func (g *gated) Apply(params any) (any, *api.ValidationError) {
	out, cost, ve := g.s.prepare(params)
	if ve != nil || cost < 0 {
		return out, ve
	}
	if g.gate == nil || cost <= inlineCost {
		return g.s.validate(out)
	}
	return g.gate.validate(g.s, out)
}

// ValidationDeadline is the longest one submission's params may take to
// validate, waiting for the gate included; past it the submission is a
// validation error, rule "cost".
const ValidationDeadline = time.Second

// inlineCost is the cost (cost.go) up to which params are validated on the
// request's own goroutine: at most about half a millisecond and half a
// MiB of the validator's allocations, which ordinary submissions are far
// below (permit_report's params cost 4).
const inlineCost = 500

// gate runs costly validations: at most cap(slots) at once, each answered
// within the deadline. A validation that misses it is answered as a
// validation error and finishes in the background, still holding its
// slot, so abandoned work never piles up past the slots.
type gate struct {
	slots    chan struct{}
	deadline time.Duration
	// ran counts validations that went through the gate (tests).
	ran atomic.Int64
}

func newGate(slots int, deadline time.Duration) *gate {
	return &gate{slots: make(chan struct{}, slots), deadline: deadline}
}

type validated struct {
	out any
	ve  *api.ValidationError
}

func (g *gate) validate(s *Schema, params any) (any, *api.ValidationError) {
	timer := time.NewTimer(g.deadline)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
	case <-timer.C:
		return nil, tooSlow(g.deadline)
	}
	g.ran.Add(1)
	done := make(chan validated, 1)
	go func() {
		defer func() { <-g.slots }()
		out, ve := s.validate(params)
		done <- validated{out, ve}
	}()
	select {
	case r := <-done:
		return r.out, r.ve
	case <-timer.C:
		return nil, tooSlow(g.deadline)
	}
}

func tooSlow(d time.Duration) *api.ValidationError {
	return &api.ValidationError{Errors: []api.FieldError{{Field: "/params", Rule: "cost",
		Message: "took longer than " + d.String() + " to validate against the type's schema (the server is validating other costly requests); send fewer or smaller values"}}}
}
