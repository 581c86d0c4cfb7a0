package schema

import (
	"github.com/jobgate/jobgate/pkg/api"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// ParamsSchema is a compiled params schema: it validates params decoded by
// canon.DecodeStrict and returns them with the schema's defaults applied.
type ParamsSchema interface {
	Apply(params any) (any, []api.FieldError)
}

// Types is what a decoder needs of the declared types: the compiled schema
// of a type by name.
type Types interface {
	Schema(typeName string) (ParamsSchema, bool)
}

// Registry is the set of declared types' compiled schemas, by type name. It
// implements Types. Reads (every submission) take no lock: writers
// (a watch on the declarations) replace an immutable map. The zero value is
// an empty registry.
type Registry struct {
	mu      sync.Mutex // serializes writers
	schemas atomic.Pointer[map[string]*Schema]
}

var _ Types = (*Registry)(nil)

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

// Schema implements Types.
func (r *Registry) Schema(name string) (ParamsSchema, bool) {
	s, ok := r.load()[name]
	if !ok {
		return nil, false // not a typed nil in the interface
	}
	return s, true
}

// Names lists the declared types, sorted.
func (r *Registry) Names() []string { return slices.Sorted(maps.Keys(r.load())) }
