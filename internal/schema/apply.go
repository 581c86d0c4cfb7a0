package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/internal/canon"
	"maps"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var english = message.NewPrinter(language.English)

// Apply fills in the schema's defaults for absent properties (at the top
// and, recursively, in nested objects that are present or were just
// defaulted), then validates. It returns the params with defaults, or the
// problems found: at most api.MaxFieldErrors of them (Truncated when there
// were more), each with Field "/params" + the instance's JSON pointer,
// Rule the failing keyword ("required", "maximum", "type",
// "additionalProperties", ...) and a short English Message. Params whose
// validation would cost more than MaxValidationCost (cost.go) are one
// problem at "/params", rule "cost", and are not validated. params is what
// canon.DecodeStrict returns; Apply never modifies it (objects that get
// defaults are copies).
func (s *Schema) Apply(params any) (any, *api.ValidationError) {
	out, cost, ve := s.prepare(params)
	if ve != nil || cost < 0 {
		return out, ve
	}
	return s.validate(out)
}

// prepare applies the defaults and counts the cost of validating the
// result: -1 when the fast path already found it valid, else the count
// (which is within MaxValidationCost unless a problem is returned).
func (s *Schema) prepare(params any) (any, int, *api.ValidationError) {
	out := params
	if m, ok := params.(map[string]any); ok {
		if s.defaults != nil {
			m, _ = s.defaults.apply(m, 0)
			out = m
		}
		if s.fast != nil && s.fast.valid(m) {
			return out, -1, nil
		}
	}
	if fe := checkNumbers(out, nil, nil); len(fe) > 0 {
		return nil, 0, bounded(fe)
	}
	cost, ok := s.cost.estimate(out, 0, MaxValidationCost)
	if !ok {
		return nil, cost, &api.ValidationError{Errors: []api.FieldError{{Field: "/params", Rule: "cost", Message: fmt.Sprintf(
			"cost more than %d subschema visits to validate against the type's schema; send fewer or smaller values", MaxValidationCost)}}}
	}
	return out, cost, nil
}

// validate runs the library on params whose cost prepare counted. A panic
// in the library is a validation error, not a dead gateway: the gate runs
// this on a goroutine of its own, where nothing else would recover it.
func (s *Schema) validate(params any) (out any, ve *api.ValidationError) {
	defer func() {
		if r := recover(); r != nil {
			out, ve = nil, &api.ValidationError{Errors: []api.FieldError{{Field: "/params", Rule: "schema",
				Message: "could not be validated against the type's schema"}}}
		}
	}()
	if err := s.compiled.Validate(params); err != nil {
		return nil, fieldErrors(err, "/params")
	}
	return params, nil
}

// bounded makes a problem of field errors a check found, cut to
// api.MaxFieldErrors.
func bounded(fe []api.FieldError) *api.ValidationError {
	ve := &api.ValidationError{Errors: fe}
	if len(fe) > api.MaxFieldErrors {
		ve.Errors, ve.Truncated = fe[:api.MaxFieldErrors], true
	}
	return ve
}

// maxExponent bounds the exponent of a number literal. The validator turns
// numbers into exact rationals, and 1e1000000 would cost it a million-digit
// integer (and 1e-10000000 a failure it does not expect); no double needs
// more than three exponent digits.
const maxExponent = 400

// checkNumbers refuses numbers outside a double's range before the
// validator sees them; it stops one past api.MaxFieldErrors (bounded says
// the list was cut).
func checkNumbers(v any, path []string, out []api.FieldError) []api.FieldError {
	if len(out) > api.MaxFieldErrors {
		return out
	}
	switch v := v.(type) {
	case json.Number:
		if !numberInRange(string(v)) {
			out = append(out, api.FieldError{Field: pointer("/params", path), Rule: "range", Message: "is outside the range of a double-precision number"})
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = checkNumbers(v[k], append(path, k), out)
		}
	case []any:
		for i, e := range v {
			out = checkNumbers(e, append(path, strconv.Itoa(i)), out)
		}
	}
	return out
}

func numberInRange(lit string) bool {
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		e, err := strconv.Atoi(lit[i+1:])
		if err != nil || e > maxExponent || e < -maxExponent {
			return false
		}
	}
	_, err := strconv.ParseFloat(lit, 64)
	return err == nil
}

func pointer(prefix string, tokens []string) string {
	var sb strings.Builder
	sb.WriteString(prefix)
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(canon.EscapePointerToken(t))
	}
	return sb.String()
}

// plan is how to default one object: the properties that have a default
// or whose own value may get some.
type plan struct {
	props []propPlan
}

type propPlan struct {
	name   string
	def    any
	hasDef bool
	sub    *plan // for the property's value when it is an object; nil if none
}

// apply returns m with defaults, and whether that is a new map.
func (p *plan) apply(m map[string]any, depth int) (map[string]any, bool) {
	if depth > canon.MaxDepth { // a schema whose defaults nest without end
		return m, false
	}
	out, copied := m, false
	for i := range p.props {
		pp := &p.props[i]
		v, present := out[pp.name]
		if !present {
			if !pp.hasDef {
				continue
			}
			v = deepCopy(pp.def)
			if !copied {
				out, copied = maps.Clone(m), true
			}
			out[pp.name] = v
		}
		if pp.sub == nil {
			continue
		}
		if sm, ok := v.(map[string]any); ok {
			if nm, changed := pp.sub.apply(sm, depth+1); changed {
				if !copied {
					out, copied = maps.Clone(m), true
				}
				out[pp.name] = nm
			}
		}
	}
	return out, copied
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// planBuilder derives the default plans from the schema document: the
// properties of a schema, of the local $refs it follows and of its allOf
// members (what always applies to the same object). anyOf, oneOf and
// if/then/else depend on the value, so their defaults are not applied.
type planBuilder struct {
	doc  any
	memo map[string]*plan
}

// maxDefaultPlans bounds the plans of one schema: one per set of
// subschemas that apply together to an object somewhere. The sets are
// found as a subset construction finds a DFA's states, and a schema of
// 1.5 KB whose properties lead to two subschemas at once had 2^16 of them
// (4 s to compile, doubling with every two more subschemas).
const maxDefaultPlans = 1024

// build returns the plan for an object that the schemas at locs (JSON
// pointers into the document) all apply to; nil if none has properties.
func (b *planBuilder) build(locs []string) *plan {
	var nodes []string
	seen := map[string]bool{}
	for _, l := range locs {
		b.expand(l, seen, &nodes)
	}
	key := strings.Join(nodes, "\x00")
	if p, ok := b.memo[key]; ok {
		return p
	}
	if len(b.memo) >= maxDefaultPlans {
		return nil // Compile refuses the schema
	}
	p := &plan{}
	b.memo[key] = p // before recursing: recursive schemas share plans
	var names []string
	subs := map[string][]string{}
	defs := map[string]any{}
	for _, at := range nodes {
		s, _ := resolve(b.doc, at).(map[string]any)
		props, _ := s["properties"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if _, ok := subs[name]; !ok {
				names = append(names, name)
			}
			subLoc := at + "/properties/" + canon.EscapePointerToken(name)
			subs[name] = append(subs[name], subLoc)
			if ps, ok := props[name].(map[string]any); ok {
				if d, ok := ps["default"]; ok {
					if _, have := defs[name]; !have {
						defs[name] = d
					}
				}
			}
		}
	}
	for _, name := range names {
		pp := propPlan{name: name}
		pp.def, pp.hasDef = defs[name]
		pp.sub = b.build(subs[name])
		if pp.hasDef || pp.sub != nil {
			p.props = append(p.props, pp)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return p
}

// expand adds at and every location it brings along ($ref, allOf).
func (b *planBuilder) expand(at string, seen map[string]bool, out *[]string) {
	if seen[at] {
		return
	}
	s, ok := resolve(b.doc, at).(map[string]any)
	if !ok {
		return
	}
	seen[at] = true
	*out = append(*out, at)
	if ref, ok := s["$ref"].(string); ok && (ref == "#" || strings.HasPrefix(ref, "#/")) {
		if ptr, err := url.PathUnescape(ref[1:]); err == nil {
			b.expand(ptr, seen, out)
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		for i := range all {
			b.expand(at+"/allOf/"+strconv.Itoa(i), seen, out)
		}
	}
}

// resolve follows a JSON pointer in doc; nil if it leads nowhere.
func resolve(doc any, ptr string) any {
	if ptr == "" {
		return doc
	}
	if ptr[0] != '/' {
		return nil
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// fieldErrors turns the library's error tree into field errors, one per
// problem a person can act on, sorted by field: at most
// api.MaxFieldErrors of them. The tree is walked in order of instance
// location (the library's order follows Go's map iteration), and the walk
// stops at the bound, so which errors are listed does not change from one
// call to the next and none past the bound is ever built.
func fieldErrors(err error, prefix string) *api.ValidationError {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &api.ValidationError{Errors: []api.FieldError{{Field: prefix, Rule: "schema", Message: err.Error()}}}
	}
	c := collector{prefix: prefix}
	c.collect(ve)
	out := c.out
	if len(out) == 0 {
		out = append(out, api.FieldError{Field: prefix, Rule: "schema", Message: "is not valid"})
	}
	slices.SortFunc(out, func(a, b api.FieldError) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return &api.ValidationError{Errors: slices.Compact(out), Truncated: c.truncated}
}

// collector gathers at most api.MaxFieldErrors field errors.
type collector struct {
	prefix    string
	out       []api.FieldError
	truncated bool
}

// full reports whether the list is at its bound, noting that something
// more was found.
func (c *collector) full() bool {
	if len(c.out) < api.MaxFieldErrors {
		return false
	}
	c.truncated = true
	return true
}

func (c *collector) add(field, rule, msg string) {
	if !c.full() {
		c.out = append(c.out, api.FieldError{Field: field, Rule: rule, Message: msg})
	}
}

// byLocation orders errors by instance location, token by token, then by
// keyword.
func byLocation(a, b *jsonschema.ValidationError) int {
	if c := slices.Compare(a.InstanceLocation, b.InstanceLocation); c != 0 {
		return c
	}
	return slices.Compare(a.ErrorKind.KeywordPath(), b.ErrorKind.KeywordPath())
}

func (c *collector) collect(e *jsonschema.ValidationError) {
	if c.full() {
		return
	}
	at := pointer(c.prefix, e.InstanceLocation)
	add := c.add
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		causes := slices.Clone(e.Causes)
		slices.SortFunc(causes, byLocation)
		for _, cause := range causes {
			c.collect(cause)
		}
	case *kind.Required:
		for _, m := range k.Missing {
			if c.full() {
				return
			}
			add(at+"/"+canon.EscapePointerToken(m), "required", "is required")
		}
	case *kind.DependentRequired:
		for _, m := range k.Missing {
			if c.full() {
				return
			}
			add(at+"/"+canon.EscapePointerToken(m), "dependentRequired", fmt.Sprintf("is required when %q is present", k.Prop))
		}
	case *kind.AdditionalProperties:
		for _, p := range slices.Sorted(slices.Values(k.Properties)) {
			if c.full() {
				return
			}
			add(at+"/"+canon.EscapePointerToken(p), "additionalProperties", "is not allowed")
		}
	case *kind.PropertyNames:
		add(at+"/"+canon.EscapePointerToken(k.Property), "propertyNames", "is not an allowed name")
	case *kind.FalseSchema:
		add(at, "false", "is not allowed")
	case *kind.Type:
		add(at, "type", "must be "+typeNames(k.Want))
	case *kind.Minimum:
		add(at, "minimum", "must be at least "+ratString(k.Want))
	case *kind.Maximum:
		add(at, "maximum", "must be at most "+ratString(k.Want))
	case *kind.ExclusiveMinimum:
		add(at, "exclusiveMinimum", "must be greater than "+ratString(k.Want))
	case *kind.ExclusiveMaximum:
		add(at, "exclusiveMaximum", "must be less than "+ratString(k.Want))
	case *kind.MultipleOf:
		add(at, "multipleOf", "must be a multiple of "+ratString(k.Want))
	case *kind.MinLength:
		add(at, "minLength", fmt.Sprintf("must be at least %d characters long", k.Want))
	case *kind.MaxLength:
		add(at, "maxLength", fmt.Sprintf("must be at most %d characters long", k.Want))
	case *kind.Pattern:
		add(at, "pattern", fmt.Sprintf("must match the pattern %s", k.Want))
	case *kind.Format:
		add(at, "format", "must be a valid "+k.Want)
	case *kind.Enum:
		add(at, "enum", "must be one of "+display(k.Want...))
	case *kind.Const:
		add(at, "const", "must be "+display(k.Want))
	case *kind.MinItems:
		add(at, "minItems", fmt.Sprintf("must have at least %d items", k.Want))
	case *kind.MaxItems:
		add(at, "maxItems", fmt.Sprintf("must have at most %d items", k.Want))
	case *kind.UniqueItems:
		add(at, "uniqueItems", fmt.Sprintf("must not repeat an item (items %d and %d are equal)", k.Duplicates[0], k.Duplicates[1]))
	case *kind.MinProperties:
		add(at, "minProperties", fmt.Sprintf("must have at least %d properties", k.Want))
	case *kind.MaxProperties:
		add(at, "maxProperties", fmt.Sprintf("must have at most %d properties", k.Want))
	case *kind.Contains:
		add(at, "contains", "must contain a matching item")
	case *kind.MinContains:
		add(at, "minContains", fmt.Sprintf("must contain at least %d matching items", k.Want))
	case *kind.MaxContains:
		add(at, "maxContains", fmt.Sprintf("must contain at most %d matching items", k.Want))
	case *kind.AnyOf:
		add(at, "anyOf", "must match one of the allowed forms")
	case *kind.OneOf:
		add(at, "oneOf", "must match exactly one of the allowed forms")
	case *kind.Not:
		add(at, "not", "must not match the excluded form")
	default:
		rule := "schema"
		if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
			rule = kp[0]
		}
		add(at, rule, e.ErrorKind.LocalizedString(english))
	}
}

func typeNames(want []string) string {
	names := make([]string, len(want))
	for i, w := range want {
		switch w {
		case "integer", "object", "array":
			names[i] = "an " + w
		case "null":
			names[i] = "null"
		default:
			names[i] = "a " + w
		}
	}
	return strings.Join(names, " or ")
}

func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func display(vs ...any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		b, err := canon.AppendCanonical(nil, v)
		if err != nil {
			b = fmt.Append(nil, v)
		}
		parts[i] = string(b)
	}
	return strings.Join(parts, ", ")
}
