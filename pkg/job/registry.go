package job

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParamKind is the type of one job parameter.
type ParamKind int

const (
	// KindInt is an integer; JSON numbers with an integral value (63, 63.0,
	// 6.3e1) are accepted and normalized to the integer.
	KindInt ParamKind = iota
)

// maxExactInt is the largest integer every JSON number parser keeps exactly.
const maxExactInt = 1<<53 - 1

// ParamSpec describes one parameter of a job type.
type ParamSpec struct {
	Name     string
	Kind     ParamKind
	Required bool
	Default  int64 // applied when not Required and absent
	Min, Max int64 // inclusive bounds; Max 0 means no upper bound
}

// TypeSpec describes a job type: its name and its parameters. Unknown
// parameters are always rejected.
type TypeSpec struct {
	Name   string
	Params []ParamSpec
}

// Registry holds the job types a deployment accepts.
type Registry struct {
	specs map[string]TypeSpec
}

// PermitReport is the permit_report job type of the contract.
var PermitReport = TypeSpec{
	Name: "permit_report",
	Params: []ParamSpec{
		{Name: "case_id", Kind: KindInt, Required: true, Min: 1},
		{Name: "revision", Kind: KindInt, Required: true, Min: 1},
		{Name: "pages", Kind: KindInt, Default: 10, Min: 1, Max: 2000},
	},
}

// NewRegistry returns a registry of the given types.
func NewRegistry(types ...TypeSpec) *Registry {
	r := &Registry{specs: make(map[string]TypeSpec, len(types))}
	for _, t := range types {
		r.specs[t.Name] = t
	}
	return r
}

// DefaultRegistry holds every type jobgate ships.
func DefaultRegistry() *Registry { return NewRegistry(PermitReport) }

// Lookup returns the spec of a type.
func (reg *Registry) Lookup(name string) (TypeSpec, bool) {
	s, ok := reg.specs[name]
	return s, ok
}

func (t TypeSpec) normalize(in map[string]any) (map[string]any, []FieldError) {
	out := make(map[string]any, len(t.Params))
	var fe []FieldError
	known := make(map[string]bool, len(t.Params))
	for _, p := range t.Params {
		known[p.Name] = true
		v, present := in[p.Name]
		if !present || v == nil {
			if p.Required {
				fe = append(fe, FieldError{Field: "params." + p.Name, Message: "required"})
				continue
			}
			out[p.Name] = p.Default
			continue
		}
		n, msg := toInt(v)
		if msg == "" && n < p.Min {
			msg = fmt.Sprintf("must be at least %d", p.Min)
		}
		if msg == "" && p.Max != 0 && n > p.Max {
			msg = fmt.Sprintf("must be at most %d", p.Max)
		}
		if msg != "" {
			fe = append(fe, FieldError{Field: "params." + p.Name, Message: msg})
			continue
		}
		out[p.Name] = n
	}
	for k := range in {
		if !known[k] {
			fe = append(fe, FieldError{Field: "params." + k, Message: "unknown parameter"})
		}
	}
	return out, fe
}

func toInt(v any) (int64, string) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, "must be an integer"
	}
	s := string(num)
	if !strings.ContainsAny(s, ".eE") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n > maxExactInt || n < -maxExactInt {
			return 0, "integer out of range"
		}
		return n, ""
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.Abs(f) > maxExactInt {
		return 0, "integer out of range"
	}
	if f != math.Trunc(f) {
		return 0, "must be an integer"
	}
	return int64(f), ""
}
