package schema

import (
	"encoding/json"
	"fmt"
	"github.com/jobgate/jobgate/internal/canon"
	"net/url"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
)

// The validation cost of a params schema is bounded twice.
//
// Compile bounds it per instance position: the library validates a value
// by visiting every subschema that applies to it in place ($ref, allOf,
// anyOf, oneOf, not, if/then/else, dependentSchemas), each as often as a
// path of those keywords leads to it, so a few hundred bytes of nested
// "allOf":[{"$ref":X},{"$ref":X}] make one value cost millions of visits
// (2^depth). Compile counts those visits, with their multiplicity, for a
// value at every depth an instance can have (properties, patternProperties,
// additionalProperties, unevaluatedProperties, propertyNames, prefixItems,
// items, contains and unevaluatedItems lead one level down), and refuses a
// schema where one value can cost more than MaxNodesPerPosition visits,
// where a chain of in-place keywords is longer than MaxInPlaceDepth, or
// where such a chain comes back to where it started (a $ref cycle, which
// never ends).
//
// Apply bounds it per submission: before the library runs, it counts the
// visits (and the loops over members, items and characters they imply) that
// this params value costs, and answers a validation error, rule "cost",
// when they exceed MaxValidationCost; the library never starts on it. The
// count is an upper bound and takes a fraction of the validation's time.
const (
	// MaxNodesPerPosition bounds the subschema visits one value of the
	// params can cost.
	MaxNodesPerPosition = 2000
	// MaxInPlaceDepth bounds a chain of in-place keywords ($ref, allOf,
	// ...) from one subschema: the library's cycle check walks the chain
	// at every visit.
	MaxInPlaceDepth = 32
	// MaxValidationCost bounds the work of validating one submission's
	// params, in subschema visits (about a microsecond each; a loop over 16
	// members, items or characters counts as one more). An array of 30,000
	// integers costs about 30,000.
	MaxValidationCost = 40000
)

// costNode is one subschema of the document with the keywords that lead
// to others.
type costNode struct {
	inplace    []int32          // $ref, allOf, anyOf, oneOf, not, if, then, else
	dependent  map[string]int32 // dependentSchemas: in place when the member is present
	props      map[string]int32
	patterns   []patternEdge
	additional int32 // -1: none
	unevalProp int32
	propNames  int32
	prefix     []int32
	items      int32
	contains   int32
	unevalItem int32

	hasObject bool // has a child keyword for members
	uneval    bool // unevaluatedProperties or unevaluatedItems: every visit below it copies the members
	enumNum   int  // numeric enum and const values: each comparison with a number parses both
	enumOther int  // the other enum and const values
	enumBytes int  // their size, canonical
	pattern   int  // the pattern's program size (instructions): a match costs about that per character
	format    bool // a format: a pass over the string
	length    bool // minLength or maxLength: the string's runes are counted
	unique    bool // uniqueItems: a pass over the items

	// Names the library looks up (and, when missing, lists) at every
	// visit of an object: required, and dependentRequired's lists (counted
	// whether or not their member is present).
	required    int
	depRequired int

	// The bounds a value the node applies to has (-1: none given), for
	// the declaration's worst case (worst.go).
	maxLength, maxItems, maxProps int
	kinds                         int // the kinds of value "type" allows (worst.go); 0: any
}

type patternEdge struct {
	re   *regexp.Regexp // nil: not compiled here, counted as matching every name
	node int32
}

// costGraph is the document's subschemas by index; node 0 is the root.
type costGraph struct {
	nodes []costNode
	pc    []int // visits of a value the node applies to, in place (≤ MaxNodesPerPosition+1)
	// Until Compile is done (compact):
	at    []string // JSON pointer of each node
	index map[string]int32
}

// compact drops what only Compile needs: a compiled schema keeps the graph
// for Apply's counts.
func (g *costGraph) compact() { g.at, g.index = nil, nil }

// buildCostGraph indexes the subschemas at locations (checkAll's, which
// include every $ref target) and checks the bounds above.
func buildCostGraph(doc any, locations []string) (*costGraph, error) {
	g := &costGraph{index: make(map[string]int32, len(locations))}
	// The root first, so it is node 0.
	add := func(at string) {
		if _, ok := g.index[at]; !ok {
			g.index[at] = int32(len(g.at))
			g.at = append(g.at, at)
		}
	}
	add("")
	for _, at := range locations {
		add(at)
	}
	g.nodes = make([]costNode, len(g.at))
	for i, at := range g.at {
		g.nodes[i] = g.node(resolve(doc, at), at)
	}
	order, err := g.inPlaceOrder()
	if err != nil {
		return nil, err
	}
	if err := g.checkPositions(order); err != nil {
		return nil, err
	}
	if err := g.checkWorstCase(order); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *costGraph) ref(at string) int32 {
	if i, ok := g.index[at]; ok {
		return i
	}
	return -1 // not a subschema: the library refuses it, or it is never reached
}

func (g *costGraph) node(v any, at string) costNode {
	n := costNode{additional: -1, unevalProp: -1, propNames: -1, items: -1, contains: -1, unevalItem: -1}
	s, ok := v.(map[string]any)
	if !ok {
		return n // a boolean schema
	}
	edge := func(list []int32, sub string) []int32 {
		if i := g.ref(sub); i >= 0 {
			list = append(list, i)
		}
		return list
	}
	if raw, ok := s["$ref"].(string); ok && (raw == "#" || strings.HasPrefix(raw, "#/")) {
		if target, err := url.PathUnescape(raw[1:]); err == nil {
			n.inplace = edge(n.inplace, target)
		}
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		if a, ok := s[kw].([]any); ok {
			for i := range a {
				n.inplace = edge(n.inplace, at+"/"+kw+"/"+strconv.Itoa(i))
			}
		}
	}
	for _, kw := range []string{"not", "if", "then", "else"} {
		if _, ok := s[kw]; ok {
			n.inplace = edge(n.inplace, at+"/"+kw)
		}
	}
	if m, ok := s["dependentSchemas"].(map[string]any); ok {
		n.dependent = map[string]int32{}
		for name := range m {
			if i := g.ref(at + "/dependentSchemas/" + canon.EscapePointerToken(name)); i >= 0 {
				n.dependent[name] = i
			}
		}
	}
	if m, ok := s["properties"].(map[string]any); ok {
		n.props = map[string]int32{}
		for name := range m {
			if i := g.ref(at + "/properties/" + canon.EscapePointerToken(name)); i >= 0 {
				n.props[name] = i
			}
		}
	}
	if m, ok := s["patternProperties"].(map[string]any); ok {
		for expr := range m {
			if i := g.ref(at + "/patternProperties/" + canon.EscapePointerToken(expr)); i >= 0 {
				re, _ := regexp.Compile(expr) // the library's engine; nil counts as matching all
				n.patterns = append(n.patterns, patternEdge{re: re, node: i})
			}
		}
	}
	one := func(kw string) int32 {
		if _, ok := s[kw]; !ok {
			return -1
		}
		return g.ref(at + "/" + kw)
	}
	n.additional, n.unevalProp, n.propNames = one("additionalProperties"), one("unevaluatedProperties"), one("propertyNames")
	n.items, n.contains, n.unevalItem = one("items"), one("contains"), one("unevaluatedItems")
	if a, ok := s["prefixItems"].([]any); ok {
		for i := range a {
			n.prefix = edge(n.prefix, at+"/prefixItems/"+strconv.Itoa(i))
		}
	}
	n.hasObject = len(n.props) > 0 || len(n.patterns) > 0 || n.additional >= 0 || n.unevalProp >= 0
	n.uneval = n.unevalProp >= 0 || n.unevalItem >= 0
	var values []any
	if e, ok := s["enum"].([]any); ok {
		values = e
	}
	if c, ok := s["const"]; ok {
		values = append(values[:len(values):len(values)], c)
	}
	for _, v := range values {
		if _, ok := v.(json.Number); ok {
			n.enumNum++
		} else {
			n.enumOther++
		}
		b, _ := canon.AppendCanonical(nil, v)
		n.enumBytes += len(b)
	}
	if p, ok := s["pattern"].(string); ok {
		n.pattern = progSize(p)
	}
	_, n.format = s["format"]
	_, minLen := s["minLength"]
	_, maxLen := s["maxLength"]
	n.length = minLen || maxLen
	n.unique = s["uniqueItems"] == true
	if r, ok := s["required"].([]any); ok {
		n.required = len(r)
	}
	if m, ok := s["dependentRequired"].(map[string]any); ok {
		for _, names := range m {
			if r, ok := names.([]any); ok {
				n.depRequired += len(r)
			}
		}
	}
	n.maxLength, n.maxItems, n.maxProps = count(s, "maxLength"), count(s, "maxItems"), count(s, "maxProperties")
	n.kinds = kindsOf(s)
	return n
}

// count is a count keyword's value (checkValues bounds it), -1 if absent.
func count(s map[string]any, kw string) int {
	n, ok := s[kw].(json.Number)
	if !ok {
		return -1
	}
	v, exact := exactSmallInt(string(n))
	if !exact || v < 0 || v > MaxCount {
		return -1
	}
	return int(v)
}

// inPlaceOrder returns the nodes in an order where every node comes after
// the nodes it leads to in place, or the $ref cycle it finds.
func (g *costGraph) inPlaceOrder() ([]int32, error) {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]uint8, len(g.nodes))
	order := make([]int32, 0, len(g.nodes))
	depth := make([]int, len(g.nodes))
	var visit func(i int32) error
	visit = func(i int32) error {
		switch state[i] {
		case done:
			return nil
		case onPath:
			return &Error{Pointer: g.at[i], Keyword: "$ref", Reason: "a cycle of $ref and in-place keywords (allOf, anyOf, oneOf, not, if/then/else, dependentSchemas) comes back to this subschema: validating it would never end"}
		}
		state[i] = onPath
		d := 0
		for _, c := range g.inPlace(i) {
			if err := visit(c); err != nil {
				return err
			}
			d = max(d, depth[c])
		}
		depth[i] = d + 1
		if depth[i] > MaxInPlaceDepth {
			return &Error{Pointer: g.at[i], Keyword: "$ref", Reason: fmt.Sprintf("a chain of more than %d $ref and in-place keywords (allOf, anyOf, oneOf, not, if/then/else, dependentSchemas) starts here", MaxInPlaceDepth)}
		}
		state[i] = done
		order = append(order, i)
		return nil
	}
	for i := range g.nodes {
		if err := visit(int32(i)); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// inPlace lists the nodes i leads to in place, dependentSchemas included.
func (g *costGraph) inPlace(i int32) []int32 {
	n := &g.nodes[i]
	if len(n.dependent) == 0 {
		return n.inplace
	}
	out := append([]int32(nil), n.inplace...)
	for _, c := range n.dependent {
		out = append(out, c)
	}
	return out
}

// checkPositions computes, for every depth an instance can have, the most
// visits one value at that depth can cost, and refuses the schema if one
// exceeds MaxNodesPerPosition. level[k][i] is the most visits a value k
// levels below a value that node i applies to can cost, counting the
// nodes i leads to in place (with multiplicity); it saturates just past the
// bound.
func (g *costGraph) checkPositions(order []int32) error {
	const limit = MaxNodesPerPosition + 1
	sat := func(a, b int) int { return min(a+b, limit) }
	n := len(g.nodes)
	inplace := make([][]int32, n)
	for i := range inplace {
		inplace[i] = g.inPlace(int32(i))
	}
	prev := make([]int, n)
	for _, i := range order { // depth 0: the value itself
		c := 1
		for _, ch := range inplace[i] {
			c = sat(c, prev[ch])
		}
		prev[i] = c
	}
	g.pc = append([]int(nil), prev...)
	if prev[0] >= limit {
		return g.tooMany(0)
	}
	cur := make([]int, n)
	at := func(i int32) int {
		if i < 0 {
			return 0
		}
		return prev[i]
	}
	for k := 1; k <= canon.MaxDepth; k++ {
		for _, i := range order {
			nd := &g.nodes[i]
			// One member value: the property it names, every pattern (all
			// may match), and additional and unevaluated properties.
			obj := 0
			for _, c := range nd.props {
				obj = max(obj, prev[c])
			}
			for _, p := range nd.patterns {
				obj = sat(obj, prev[p.node])
			}
			obj = sat(obj, sat(at(nd.additional), at(nd.unevalProp)))
			if k == 1 && nd.propNames >= 0 { // a member's name, a string
				obj = max(obj, prev[nd.propNames])
			}
			arr := 0
			for _, c := range nd.prefix {
				arr = max(arr, prev[c])
			}
			arr = sat(arr, sat(at(nd.items), sat(at(nd.contains), at(nd.unevalItem))))
			c := max(obj, arr)
			for _, ch := range inplace[i] {
				c = sat(c, cur[ch])
			}
			cur[i] = c
		}
		if cur[0] >= limit {
			return g.tooMany(k)
		}
		if cur[0] == 0 {
			return nil // no subschema applies this deep
		}
		prev, cur = cur, prev
	}
	return nil
}

// tooMany explains a schema refused by checkPositions, pointing at a
// subschema that multiplies the visits if there is one.
func (g *costGraph) tooMany(depth int) error {
	at := ""
	for i, c := range g.pc {
		if c <= MaxNodesPerPosition {
			continue
		}
		// The innermost such node: its in-place children are each within
		// the bound, it adds them up.
		inner := true
		for _, ch := range g.inPlace(int32(i)) {
			if g.pc[ch] > MaxNodesPerPosition {
				inner = false
				break
			}
		}
		if inner {
			at = g.at[i]
			break
		}
	}
	where := "the params"
	if depth > 0 {
		where = fmt.Sprintf("one value at depth %d of the params", depth)
	}
	return &Error{Pointer: at, Keyword: "allOf", Reason: fmt.Sprintf("validating %s visits more than %d subschemas: nested $ref, allOf, anyOf, oneOf, not, if/then/else or dependentSchemas multiply (a subschema reached by two paths is visited twice)", where, MaxNodesPerPosition)}
}

// estimator counts the work of validating one value, up to a budget.
type estimator struct {
	g      *costGraph
	cost   int
	budget int
	next   [][]int32 // per depth: the nodes that apply to a member or item
	all    [][]int32 // per depth: the nodes that apply in place
}

// estimate returns the cost of validating v against node root, and
// whether it is at most budget (past it, the count stops).
func (g *costGraph) estimate(v any, root int32, budget int) (int, bool) {
	e := &estimator{g: g, budget: budget}
	ok := e.visit(v, []int32{root}, 0)
	return e.cost, ok
}

// expand appends the nodes that apply to v in place, starting with nodes,
// each as often as the library visits it.
func (e *estimator) expand(out []int32, i int32, obj map[string]any) []int32 {
	out = append(out, i)
	n := &e.g.nodes[i]
	for _, c := range n.inplace {
		out = e.expand(out, c, obj)
	}
	for name, c := range n.dependent {
		if _, ok := obj[name]; ok {
			out = e.expand(out, c, obj)
		}
	}
	return out
}

// scratch returns the emptied buffer of a depth.
func scratch(bufs *[][]int32, depth int) []int32 {
	for len(*bufs) <= depth {
		*bufs = append(*bufs, nil)
	}
	return (*bufs)[depth][:0]
}

// visit charges the visits of v by the nodes in apply (and in place by
// those they lead to), then its members or items; false once over budget.
func (e *estimator) visit(v any, apply []int32, depth int) bool {
	obj, _ := v.(map[string]any)
	all := scratch(&e.all, depth)
	defer func() { e.all[depth] = all[:0] }()
	pending := 0
	for _, i := range apply {
		// The static count bounds the expansion: none past the budget.
		if pending += e.g.pc[i]; pending > e.budget-e.cost {
			e.cost += pending
			return false
		}
		all = e.expand(all, i, obj)
	}
	uneval := false
	for _, i := range all {
		uneval = uneval || e.g.nodes[i].uneval
	}
	for _, i := range all {
		e.cost += 1 + e.extra(&e.g.nodes[i], v, uneval)
	}
	if e.cost > e.budget {
		return false
	}
	switch v := v.(type) {
	case map[string]any:
		for name, val := range v {
			next := scratch(&e.next, depth+1)
			for _, i := range all {
				n := &e.g.nodes[i]
				if !n.hasObject && n.propNames < 0 {
					continue
				}
				matched := false
				if c, ok := n.props[name]; ok {
					next, matched = append(next, c), true
				}
				for _, p := range n.patterns {
					e.cost += len(name) / 256
					if p.re == nil || p.re.MatchString(name) {
						next, matched = append(next, p.node), true
					}
				}
				if !matched && n.additional >= 0 {
					next = append(next, n.additional)
				}
				if n.unevalProp >= 0 {
					next = append(next, n.unevalProp)
				}
				if n.propNames >= 0 && !e.visit(name, []int32{n.propNames}, depth+1) {
					return false
				}
			}
			e.next[depth+1] = next
			if len(next) > 0 && !e.visit(val, next, depth+1) {
				return false
			}
		}
	case []any:
		for idx, item := range v {
			next := scratch(&e.next, depth+1)
			for _, i := range all {
				n := &e.g.nodes[i]
				if idx < len(n.prefix) {
					next = append(next, n.prefix[idx])
				} else if n.items >= 0 {
					next = append(next, n.items)
				}
				if n.contains >= 0 {
					next = append(next, n.contains)
				}
				if n.unevalItem >= 0 {
					next = append(next, n.unevalItem)
				}
			}
			e.next[depth+1] = next
			if len(next) > 0 && !e.visit(item, next, depth+1) {
				return false
			}
		}
	}
	return e.cost <= e.budget
}

// namesPerVisit is how many required (and dependentRequired) names count
// as one visit: the library looks each up in the object and lists the
// missing ones in its error, which the gateway may turn into field errors.
const namesPerVisit = 4

// extra is the work of one visit beyond the visit itself: the library
// loops over an object's members at every visit (and copies their names
// where unevaluated properties are tracked), looks up its required names,
// compares enum values, runs patterns and formats over strings and hashes
// items for uniqueItems.
func (e *estimator) extra(n *costNode, v any, uneval bool) int {
	x := 0
	if n.enumNum+n.enumOther > 0 {
		if _, ok := v.(json.Number); ok {
			x += 2 * n.enumNum // two big.Rat parses a comparison
		}
		x += (n.enumNum+n.enumOther)/64 + n.enumBytes/4096
	}
	switch v := v.(type) {
	case map[string]any:
		x += len(v)/16 + (n.required+n.depRequired)/namesPerVisit
		if uneval {
			x += len(v) / 4
		}
		if len(n.patterns) > 0 {
			x += len(v) * len(n.patterns) / 8
		}
	case []any:
		if uneval {
			x += len(v) / 4
		}
		if n.unique {
			x += len(v)
		}
	case string:
		x += len(v) * n.pattern / 128
		if n.format {
			x += len(v) / 16
		}
		if n.length {
			x += len(v) / 64
		}
	}
	return x
}

// progSize is the number of instructions of a pattern's program, which
// bounds the work of a match per character of the string (Go's regexp
// engines are linear in both).
func progSize(expr string) int {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return len(expr) // the library refuses it
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return len(expr)
	}
	return len(prog.Inst)
}
