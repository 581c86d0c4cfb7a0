package schema

import (
	"fmt"
	"math"
)

// The declaration's worst case. Apply counts the cost of each submission
// and refuses one over MaxValidationCost before the library runs; Compile
// also refuses a schema where some body of 64 KiB could cost more than
// MaxDeclaredCost, however it is counted at submission: the keywords
// whose work multiplies per value (required and dependentRequired names,
// enum and const values, patterns and formats over long strings,
// uniqueItems over many items) times the number of values a body can hold
// where they apply. So a type cannot be declared whose ordinary use would
// lean on the submission-time count alone.
const (
	// MaxDeclaredCost bounds the worst case of one 64 KiB body, in the
	// units of MaxValidationCost (about a microsecond and 200 bytes of
	// the validator's allocation each): about what the validator does in
	// ValidationDeadline.
	MaxDeclaredCost = 1 << 20
	// maxBodyBytes is the gateway's bound of a submission's body: no
	// params hold more values than fit in it.
	maxBodyBytes = 64 << 10
)

// The kinds of value a node accepts ("type"), for the fewest bytes a value
// it applies to can take.
const (
	kindObject = 1 << iota
	kindArray
	kindString
	kindScalar // number, integer, boolean, null
)

func kindsOf(s map[string]any) int {
	k := 0
	for name := range types(s) {
		switch name {
		case "object":
			k |= kindObject
		case "array":
			k |= kindArray
		case "string":
			k |= kindString
		default:
			k |= kindScalar
		}
	}
	return k
}

// maxValues is how many values a node applies to at most in one body: a
// scalar takes two bytes with its separator, "{}", "[]" and `""` three.
func (n *costNode) maxValues() int {
	if n.kinds != 0 && n.kinds&kindScalar == 0 {
		return maxBodyBytes / 3
	}
	return maxBodyBytes / 2
}

// weight is the most one visit of the node can cost (estimator.extra for
// the costliest value the node's bounds allow), and the keyword that
// costs most of it.
func (n *costNode) weight() (int, string) {
	w, kw := 1, ""
	add := func(x int, keyword string) {
		if x > w-1 {
			kw = keyword
		}
		w += x
	}
	if n.enumNum+n.enumOther > 0 {
		add(2*n.enumNum+(n.enumNum+n.enumOther)/64+n.enumBytes/4096, "enum")
	}
	add((n.required+n.depRequired)/namesPerVisit, "required")
	length := n.maxLength
	if length < 0 {
		length = maxBodyBytes
	}
	add(length*n.pattern/128, "pattern")
	if n.format {
		add(length/16, "format")
	}
	if n.length {
		add(length/64, "maxLength")
	}
	if n.unique {
		items := n.maxItems
		if items < 0 {
			items = maxBodyBytes / 2
		}
		add(items, "uniqueItems")
	}
	return w, kw
}

// checkWorstCase refuses the schema when some body could cost more than
// MaxDeclaredCost: for each node, the cost of the visits one value makes
// in place from it (weighted as weight), times the most values it applies
// to in a body. order is inPlaceOrder's.
func (g *costGraph) checkWorstCase(order []int32) error {
	const cap = math.MaxInt32
	sat := func(a, b int) int { return min(a+b, cap) }
	n := len(g.nodes)
	weights := make([]int, n)
	keywords := make([]string, n)
	for i := range g.nodes {
		weights[i], keywords[i] = g.nodes[i].weight()
	}
	// Per value, in place: the node's weight and its in-place children's.
	perValue := make([]int, n)
	for _, i := range order {
		c := weights[i]
		for _, ch := range g.inPlace(i) {
			c = sat(c, perValue[ch])
		}
		perValue[i] = c
	}
	values := g.valueCounts()
	for i := range g.nodes {
		if worst := int64(perValue[i]) * int64(values[i]); worst > MaxDeclaredCost {
			return g.tooCostly(int32(i), weights, keywords, perValue[i], values[i], worst)
		}
	}
	return nil
}

// valueCounts returns, for each node, the most values (or visits, where
// in-place keywords lead to it by several paths) of one body it applies
// to: the root one; a property's, an in-place subschema's and a prefix
// item's as many as their parent's, summed over parents; an item's or a
// member's its container's times the container's maxItems or
// maxProperties; never more than fit in the body. A node on a cycle
// (recursive schemas) or below one applies to as many values as fit.
func (g *costGraph) valueCounts() []int {
	n := len(g.nodes)
	comps := g.components()
	count := make([]int, n)
	count[0] = 1
	// Tarjan's algorithm finds a component after every component it
	// leads to: walk them in reverse, parents first.
	for c := len(comps) - 1; c >= 0; c-- {
		comp := comps[c]
		if len(comp) > 1 || g.selfLoop(comp[0]) {
			for _, i := range comp {
				if count[i] > 0 {
					for _, j := range comp {
						count[j] = g.nodes[j].maxValues()
					}
					break
				}
			}
		}
		for _, i := range comp {
			if count[i] == 0 {
				continue
			}
			g.children(i, func(ch int32, factor int) {
				count[ch] = min(g.nodes[ch].maxValues(), count[ch]+count[i]*factor)
			})
		}
	}
	return count
}

// children calls fn with each node i leads to and how many values of it
// one value of i holds at most (1 for a subschema in place or a named
// property).
func (g *costGraph) children(i int32, fn func(ch int32, factor int)) {
	nd := &g.nodes[i]
	for _, ch := range g.inPlace(i) {
		fn(ch, 1)
	}
	for _, ch := range nd.props {
		fn(ch, 1)
	}
	members := bound(nd.maxProps)
	for _, p := range nd.patterns {
		fn(p.node, members)
	}
	for _, ch := range []int32{nd.additional, nd.unevalProp, nd.propNames} {
		if ch >= 0 {
			fn(ch, members)
		}
	}
	for _, ch := range nd.prefix {
		fn(ch, 1)
	}
	items := bound(nd.maxItems)
	for _, ch := range []int32{nd.items, nd.contains, nd.unevalItem} {
		if ch >= 0 {
			fn(ch, items)
		}
	}
}

func (g *costGraph) selfLoop(i int32) bool {
	loop := false
	g.children(i, func(ch int32, _ int) { loop = loop || ch == i })
	return loop
}

// components returns the strongly connected components of the graph of
// all child keywords (Tarjan's algorithm), each after those it leads to.
func (g *costGraph) components() [][]int32 {
	n := len(g.nodes)
	index := make([]int, n)
	low := make([]int, n)
	on := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	var out [][]int32
	next := 0
	var visit func(i int32)
	visit = func(i int32) {
		index[i], low[i] = next, next
		next++
		stack = append(stack, i)
		on[i] = true
		g.children(i, func(ch int32, _ int) {
			switch {
			case index[ch] < 0:
				visit(ch)
				low[i] = min(low[i], low[ch])
			case on[ch]:
				low[i] = min(low[i], index[ch])
			}
		})
		if low[i] == index[i] {
			var comp []int32
			for {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[top] = false
				comp = append(comp, top)
				if top == i {
					break
				}
			}
			out = append(out, comp)
		}
	}
	for i := range n {
		if index[i] < 0 {
			visit(int32(i))
		}
	}
	return out
}

// bound is a maxItems or maxProperties as a count of values: absent, as
// many as fit in the body.
func bound(max int) int {
	if max < 0 {
		return maxBodyBytes / 2
	}
	return max
}

// tooCostly explains a schema refused by checkWorstCase: the node whose
// worst case is over, and the keyword costing most where it applies (its
// own, or "allOf" when its in-place subschemas add up).
func (g *costGraph) tooCostly(i int32, weights []int, keywords []string, perValue, values int, worst int64) error {
	kw := keywords[i]
	if weights[i]*2 < perValue {
		kw = "allOf"
	}
	if kw == "" {
		kw = "maxItems"
	}
	return &Error{Pointer: g.at[i], Keyword: kw, Reason: fmt.Sprintf(
		"validating a 64 KiB body could cost %d units, more than %d: this subschema costs up to %d per value (%s) and applies to up to %d values; lower maxItems or maxProperties, or make %s cheaper",
		worst, MaxDeclaredCost, perValue, kw, values, kw)}
}
