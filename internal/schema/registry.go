package schema

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jobgate/jobgate/pkg/job"
)

// Registry is the set of declared types' compiled schemas, by type name. It
// implements job.Types. Reads (every submission) take no lock: writers
// (a watch on the declarations) replace an immutable map. The zero value is
// an empty registry.
type Registry struct {
	mu      sync.Mutex // serializes writers
	schemas atomic.Pointer[map[string]*Schema]
}

var _ job.Types = (*Registry)(nil)

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

func (r *Registry) load() map[string]*Schema {
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
		next = map[string]*Schema{}
	}
	if s == nil {
		delete(next, name)
	} else {
		next[name] = s
	}
	r.schemas.Store(&next)
}

// Delete forgets a type.
func (r *Registry) Delete(name string) { r.Set(name, nil) }

// Lookup returns the compiled schema of a type.
func (r *Registry) Lookup(name string) (*Schema, bool) {
	s, ok := r.load()[name]
	return s, ok
}

// Schema implements job.Types.
func (r *Registry) Schema(name string) (job.ParamsSchema, bool) {
	s, ok := r.load()[name]
	if !ok {
		return nil, false // not a typed nil in the interface
	}
	return s, true
}

// Names lists the declared types, sorted.
func (r *Registry) Names() []string { return slices.Sorted(maps.Keys(r.load())) }
