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
)

// Draft is the only JSON Schema dialect a params schema may name in
// $schema; without $schema it is assumed.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// location is the URL a compiled schema document lives at inside the
// library; it is never fetched.
const location = "urn:jobgate:params"

// Error is a schema that Compile refuses. Pointer is the JSON pointer of the
// offending place inside the schema ("" for the whole schema); Keyword is
// the keyword it lacks or breaks, when there is one.
type Error struct {
	Pointer string
	Keyword string
	Reason  string
}

func (e *Error) Error() string {
	at := e.Pointer
	if at == "" {
		at = "(root)"
	}
	return "params schema at " + at + ": " + e.Reason
}

// Schema is a compiled params schema. It is immutable and safe for
// concurrent use.
type Schema struct {
	canonical []byte
	compiled  *jsonschema.Schema
	defaults  *plan
	fast      *fastSchema // nil unless the schema is in its subset
	cost      *costGraph
}

var _ ParamsSchema = (*Schema)(nil)

// JSON returns the schema in canonical form (RFC 8785): two declarations of
// the same schema have the same bytes.
func (s *Schema) JSON() json.RawMessage { return s.canonical }

// Compile checks and compiles a params schema. It refuses, with an *Error
// (or an error wrapping api.ErrMalformed for invalid JSON):
//   - anything but a draft 2020-12 schema whose top level is "type":"object";
//   - $id, $dynamicRef, and a $ref that is not a JSON pointer into this
//     document (nothing is ever loaded: the loader fails every URL);
//   - unbounded input: a string type without maxLength, an array type
//     without maxItems, an object type that allows additional or pattern
//     properties without maxProperties (enum and const are bounded). A
//     subschema without "type" is not checked: it accepts any value, which
//     only the gateway's 64 KiB body limit bounds;
//   - a default that does not validate against its own schema, or whose
//     validation costs more than MaxValidationCost;
//   - schemas whose validation can cost more than a small budget (see
//     MaxNodesPerPosition, MaxInPlaceDepth and the $ref cycles in cost.go),
//     or whose values are absurd: a document over api.MaxSchemaBytes, a
//     maxLength, maxItems, maxProperties (or min..., maxContains,
//     minContains) that is not an integer from 0 to MaxCount, a minimum or
//     maximum no double reaches, a minimum above its maximum, enum and
//     const values over MaxEnumBytes in all, a pattern (or a
//     patternProperties name) over MaxPatternBytes;
//   - what the JSON Schema library itself refuses (metaschema, regexps).
func Compile(raw []byte) (*Schema, error) {
	if len(raw) > api.MaxSchemaBytes {
		return nil, &Error{Reason: fmt.Sprintf("the schema is %d bytes, at most %d", len(raw), api.MaxSchemaBytes)}
	}
	doc, err := canon.DecodeStrict(raw)
	if err != nil {
		return nil, fmt.Errorf("params schema: %w", err)
	}
	root, ok := doc.(map[string]any)
	if !ok || root["type"] != "object" {
		return nil, &Error{Keyword: "type", Reason: `the top level must be a schema with "type": "object"`}
	}
	if s, ok := root["$schema"]; ok && s != Draft && s != Draft+"#" {
		return nil, &Error{Pointer: "/$schema", Keyword: "$schema", Reason: fmt.Sprintf("only %s is supported", Draft)}
	}
	locations, err := checkAll(doc)
	if err != nil {
		return nil, err
	}
	cost, err := buildCostGraph(doc, locations)
	if err != nil {
		return nil, err
	}
	c := newCompiler()
	if err := c.AddResource(location, doc); err != nil {
		return nil, &Error{Reason: err.Error()}
	}
	compiled, err := c.Compile(location)
	if err != nil {
		return nil, &Error{Reason: libraryMessage(err)}
	}
	if err := checkDefaults(c, doc, locations, cost); err != nil {
		return nil, err
	}
	canonical, err := canon.AppendCanonical(nil, doc)
	if err != nil {
		return nil, &Error{Reason: err.Error()}
	}
	var defaults *plan
	if hasDefault(doc, locations) {
		b := planBuilder{doc: doc, memo: map[string]*plan{}}
		defaults = b.build([]string{""})
		if len(b.memo) >= maxDefaultPlans {
			return nil, &Error{Keyword: "default", Reason: fmt.Sprintf("applying the defaults takes more than %d combinations of subschemas (properties whose $ref and allOf lead to several subschemas at once, level after level)", maxDefaultPlans)}
		}
	}
	cost.compact()
	return &Schema{canonical: canonical, compiled: compiled, defaults: defaults, fast: buildFast(root), cost: cost}, nil
}

// MustCompile is Compile for schemas known to be valid (a program's own
// types); it panics otherwise.
func MustCompile(raw []byte) *Schema {
	s, err := Compile(raw)
	if err != nil {
		panic(err)
	}
	return s
}

// failLoader is the compiler's only loader: a params schema is one
// self-contained document, so any URL the library would fetch is refused.
type failLoader struct{}

func (failLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("loading %s refused: params schemas must be self-contained", u)
}

func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(failLoader{})
	c.AssertFormat()
	return c
}

func libraryMessage(err error) string {
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return strings.ReplaceAll(err.Error(), location, "")
}

// The keywords whose values are subschemas (draft 2020-12 plus the
// legacy "definitions"), by shape.
var (
	oneSchema   = []string{"additionalProperties", "propertyNames", "items", "contains", "not", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	schemaMap   = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaArray = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
)

// checker walks every subschema: references stay inside the document and
// every string, array and object a client can send is bounded. A $ref may
// point anywhere in the document, also outside the keywords the walk
// follows, so each target is walked too.
type checker struct {
	doc          any
	visited      map[string]bool
	refs         []string // JSON pointers of $ref targets
	enumBytes    int      // enum and const values so far, canonical
	patternInsts int      // the programs of the patterns so far (pattern.go)
}

// checkAll checks the schema and returns the locations of all its
// subschemas, sorted.
func checkAll(doc any) ([]string, error) {
	c := &checker{doc: doc, visited: map[string]bool{}}
	if err := c.check(doc, ""); err != nil {
		return nil, err
	}
	for len(c.refs) > 0 {
		target := c.refs[0]
		c.refs = c.refs[1:]
		if c.visited[target] {
			continue
		}
		v := resolve(doc, target)
		if v == nil {
			continue // the library reports the dangling reference
		}
		if err := c.check(v, target); err != nil {
			return nil, err
		}
	}
	return slices.Sorted(maps.Keys(c.visited)), nil
}

func (c *checker) check(v any, at string) error {
	if c.visited[at] {
		return nil
	}
	c.visited[at] = true
	s, ok := v.(map[string]any)
	if !ok {
		return nil // a boolean schema (or a value the metaschema refuses)
	}
	if _, ok := s["$id"]; ok {
		return &Error{Pointer: at + "/$id", Keyword: "$id", Reason: "$id is not allowed: a params schema is one self-contained document"}
	}
	for _, kw := range []string{"$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"} {
		if _, ok := s[kw]; ok {
			return &Error{Pointer: at + "/" + kw, Keyword: kw, Reason: kw + " is not supported in params schemas; use $ref with a JSON pointer"}
		}
	}
	if raw, ok := s["$ref"]; ok {
		ref, _ := raw.(string)
		if ref != "#" && !strings.HasPrefix(ref, "#/") {
			return &Error{Pointer: at + "/$ref", Keyword: "$ref", Reason: fmt.Sprintf("$ref %q must be a JSON pointer into this schema (\"#/$defs/...\"): nothing is loaded from elsewhere", ref)}
		}
		target, err := url.PathUnescape(ref[1:])
		if err != nil {
			return &Error{Pointer: at + "/$ref", Keyword: "$ref", Reason: fmt.Sprintf("$ref %q is not a valid fragment", ref)}
		}
		c.refs = append(c.refs, target)
	}
	if at != "" {
		if _, ok := s["$schema"]; ok {
			return &Error{Pointer: at + "/$schema", Keyword: "$schema", Reason: "$schema is allowed only at the top level"}
		}
	}
	if err := checkValues(s, at); err != nil {
		return err
	}
	if err := c.checkEnums(s, at); err != nil {
		return err
	}
	if err := c.checkPatterns(s, at); err != nil {
		return err
	}
	if err := checkBounds(s, at); err != nil {
		return err
	}
	for _, kw := range oneSchema {
		if sub, ok := s[kw]; ok {
			if err := c.check(sub, at+"/"+kw); err != nil {
				return err
			}
		}
	}
	for _, kw := range schemaMap {
		if m, ok := s[kw].(map[string]any); ok {
			for _, name := range slices.Sorted(maps.Keys(m)) {
				if err := c.check(m[name], at+"/"+kw+"/"+canon.EscapePointerToken(name)); err != nil {
					return err
				}
			}
		}
	}
	for _, kw := range schemaArray {
		if a, ok := s[kw].([]any); ok {
			for i, sub := range a {
				if err := c.check(sub, at+"/"+kw+"/"+strconv.Itoa(i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func types(s map[string]any) map[string]bool {
	out := map[string]bool{}
	switch t := s["type"].(type) {
	case string:
		out[t] = true
	case []any:
		for _, e := range t {
			if name, ok := e.(string); ok {
				out[name] = true
			}
		}
	}
	return out
}

func checkBounds(s map[string]any, at string) error {
	_, enum := s["enum"]
	_, konst := s["const"]
	if enum || konst {
		return nil // the listed values are the bound
	}
	t := types(s)
	if t["string"] {
		if _, ok := s["maxLength"]; !ok {
			return &Error{Pointer: at, Keyword: "maxLength", Reason: "a string must have a maxLength (or be an enum or const): params are bounded"}
		}
	}
	if t["array"] {
		_, max := s["maxItems"]
		_, prefix := s["prefixItems"]
		if !max && !(prefix && s["items"] == false) {
			return &Error{Pointer: at, Keyword: "maxItems", Reason: "an array must have a maxItems: params are bounded"}
		}
	}
	if t["object"] {
		_, max := s["maxProperties"]
		closed := s["additionalProperties"] == false || s["unevaluatedProperties"] == false
		pattern, _ := s["patternProperties"].(map[string]any)
		if !max && (!closed || len(pattern) > 0) {
			return &Error{Pointer: at, Keyword: "additionalProperties", Reason: `an object must have "additionalProperties": false (and no patternProperties) or a maxProperties: params are bounded`}
		}
	}
	return nil
}

// Bounds of a schema's values.
const (
	// MaxCount is the largest maxLength, maxItems, maxProperties (and
	// minLength, ..., maxContains, minContains) a schema may give: the
	// gateway takes request bodies of at most 64 KiB, so no request has a
	// longer string or more items or members, and a larger bound says
	// nothing.
	MaxCount = 64 << 10
	// MaxEnumBytes bounds the enum and const values of one schema, in
	// all (canonical JSON): every visit compares a value with each.
	MaxEnumBytes = 16 << 10
	// MaxPatternBytes bounds a pattern and a patternProperties name.
	MaxPatternBytes = 512
)

// The keywords whose values are counts, by their pairs (min, max).
var countPairs = [][2]string{{"minLength", "maxLength"}, {"minItems", "maxItems"}, {"minProperties", "maxProperties"}, {"minContains", "maxContains"}}

// The keywords whose values are numbers an instance is compared with.
var numberKeywords = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}

// checkValues refuses counts and numbers no request can meet or need, and
// patterns over MaxPatternBytes.
func checkValues(s map[string]any, at string) error {
	for _, pair := range countPairs {
		var vals [2]int64
		for i, kw := range pair {
			raw, ok := s[kw]
			vals[i] = -1
			if !ok {
				continue
			}
			n, isNum := raw.(json.Number)
			if !isNum {
				continue // the metaschema refuses it
			}
			v, exact := exactSmallInt(string(n))
			if !exact || v < 0 || v > MaxCount {
				return &Error{Pointer: at + "/" + kw, Keyword: kw, Reason: fmt.Sprintf("%s must be an integer from 0 to %d (a request body holds at most 64 KiB), got %v", kw, MaxCount, raw)}
			}
			vals[i] = v
		}
		if vals[0] >= 0 && vals[1] >= 0 && vals[0] > vals[1] {
			return &Error{Pointer: at + "/" + pair[0], Keyword: pair[0], Reason: fmt.Sprintf("%s %d is above %s %d: no value meets both", pair[0], vals[0], pair[1], vals[1])}
		}
	}
	var lo, hi *big.Rat
	for _, kw := range numberKeywords {
		raw, ok := s[kw]
		if !ok {
			continue
		}
		n, isNum := raw.(json.Number)
		if !isNum {
			continue // the metaschema refuses it
		}
		if !numberInRange(string(n)) {
			return &Error{Pointer: at + "/" + kw, Keyword: kw, Reason: fmt.Sprintf("%s %v is outside the range of a double-precision number, which every number in params is", kw, raw)}
		}
		r, ok := new(big.Rat).SetString(string(n))
		if !ok {
			return &Error{Pointer: at + "/" + kw, Keyword: kw, Reason: fmt.Sprintf("%s %v is not a number", kw, raw)}
		}
		switch kw {
		case "minimum":
			lo = r
		case "maximum":
			hi = r
		}
	}
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return &Error{Pointer: at + "/minimum", Keyword: "minimum", Reason: "minimum is above maximum: no number meets both"}
	}
	if s["format"] == "regex" {
		n, ok := s["maxLength"].(json.Number)
		if v, exact := exactSmallInt(string(n)); !ok || !exact || v > MaxPatternBytes {
			return &Error{Pointer: at + "/format", Keyword: "format", Reason: fmt.Sprintf(`"format": "regex" needs a maxLength of at most %d beside it: the gateway compiles the value as a regular expression`, MaxPatternBytes)}
		}
	}
	if p, ok := s["pattern"].(string); ok && len(p) > MaxPatternBytes {
		return &Error{Pointer: at + "/pattern", Keyword: "pattern", Reason: fmt.Sprintf("a pattern may have at most %d bytes, this one has %d", MaxPatternBytes, len(p))}
	}
	if m, ok := s["patternProperties"].(map[string]any); ok {
		for _, p := range slices.Sorted(maps.Keys(m)) {
			if len(p) > MaxPatternBytes {
				return &Error{Pointer: at + "/patternProperties", Keyword: "patternProperties", Reason: fmt.Sprintf("a pattern may have at most %d bytes, one has %d", MaxPatternBytes, len(p))}
			}
		}
	}
	return nil
}

// checkEnums adds up the enum and const values of the schema.
func (c *checker) checkEnums(s map[string]any, at string) error {
	for _, kw := range []string{"enum", "const"} {
		v, ok := s[kw]
		if !ok {
			continue
		}
		b, err := canon.AppendCanonical(nil, v)
		if err != nil {
			return &Error{Pointer: at + "/" + kw, Keyword: kw, Reason: err.Error()}
		}
		c.enumBytes += len(b)
		if c.enumBytes > MaxEnumBytes {
			return &Error{Pointer: at + "/" + kw, Keyword: kw, Reason: fmt.Sprintf("the enum and const values of a schema may have at most %d bytes in all (canonical JSON)", MaxEnumBytes)}
		}
	}
	return nil
}

// hasDefault reports whether any subschema has a default.
func hasDefault(doc any, locations []string) bool {
	for _, at := range locations {
		if s, ok := resolve(doc, at).(map[string]any); ok {
			if _, ok := s["default"]; ok {
				return true
			}
		}
	}
	return false
}

// checkDefaults validates every default against the schema it sits in,
// all of them within the cost budget of one submission.
func checkDefaults(c *jsonschema.Compiler, doc any, locations []string, cost *costGraph) error {
	spent := 0
	for _, at := range locations {
		s, ok := resolve(doc, at).(map[string]any)
		if !ok {
			continue
		}
		def, ok := s["default"]
		if !ok {
			continue
		}
		if i := cost.ref(at); i >= 0 {
			n, ok := cost.estimate(def, i, MaxValidationCost-spent)
			if !ok {
				return &Error{Pointer: at + "/default", Keyword: "default", Reason: fmt.Sprintf("validating the defaults costs more than %d subschema visits in all", MaxValidationCost)}
			}
			spent += n
		}
		sub, err := c.Compile(location + "#" + fragment(at))
		if err != nil {
			return &Error{Pointer: at, Reason: libraryMessage(err)}
		}
		if err := sub.Validate(def); err != nil {
			reason := "the default does not validate"
			if fe := fieldErrors(err, "").Errors; len(fe) > 0 {
				reason += ": " + strings.TrimSpace(fe[0].Field+" "+fe[0].Message)
			}
			return &Error{Pointer: at + "/default", Keyword: "default", Reason: reason}
		}
	}
	return nil
}

// fragment percent-encodes a JSON pointer for use as a URL fragment.
func fragment(ptr string) string {
	toks := strings.Split(ptr, "/")
	for i := range toks {
		toks[i] = url.PathEscape(toks[i])
	}
	return strings.Join(toks, "/")
}
