package chaos

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check runs Porcupine (github.com/anishathalye/porcupine)
// over every client call of the history, one partition per idempotency key
// (and per batch item), against the sequential model a client is promised:
//
//   - a key is a register that is empty until a submission creates its job
//     and then names that job for the job's whole life;
//   - the job is a record that only moves forward: its revision, state and
//     attempt never decrease, a terminal state never changes;
//   - a read of the job (poll, SSE event, a cancel's answer, the final
//     read of the bucket) answers the record as it is at some instant
//     within the call.
//
// Each HTTP attempt is one operation from its start to its end. An
// attempt without a definitive answer (no answer, a timeout, a 5xx) may
// have taken effect at any time after it began, even after the client gave
// up (Jepsen's "info"): it never returns, and the model lets it create the
// key's job or not. An attempt refused before anything was written (429 or
// another 4xx but 409) changes nothing and is left out. Porcupine then
// searches for one order of all the operations that respects real time
// (an operation that ended before another began comes first) in which every
// answer is what the model allows. None means some answer was a lie: a
// second job or a second 202 for a key, a replay naming another job, a
// conflict admitted, an acknowledged job answering 404 (a read from a
// replica that had not seen its creation), a state read after a newer one
// was already answered.
//
// The pairwise checks (checkKeys, checkOrder) catch most of these too, and
// name them better; this one is the single criterion that covers every
// interleaving, so a lie neither foresaw is still caught.

// linOp is one operation's input: what was asked.
type linOp struct {
	kind string // submit, read
	// submit: the key's own body (false: another body, 409 expected)
	ownBody bool
	job     string // read: the job read
	what    string // for the report
}

// linOut is what was answered.
type linOut struct {
	outcome string // created (202), replayed (200), refused (409), unknown, found, missing (404)
	job     string // created, replayed: the job (a batch: its id and items)
	state   string // found: the job's state (empty: revision only)
	attempt int
	rev     uint64
}

// linState is the key's register and its job's record as far as seen.
type linState struct {
	job  string // "" none yet, "?" created by a call whose answer was lost
	rank int
	rev  uint64
	term string
}

const jobUnknown = "?"

func linStep(s linState, in linOp, out linOut) []linState {
	if in.kind == "read" {
		switch {
		case out.outcome == "missing" && s.job == "":
			return []linState{s}
		case out.outcome == "missing", s.job == "":
			// 404 for a created job, or a job read before its key made it.
			return nil
		case s.job == jobUnknown:
			s.job = in.job // the lost answer's job is the one read
		case s.job != in.job:
			return nil
		}
		return advance(s, out)
	}
	switch out.outcome {
	case "unknown":
		if s.job == "" {
			return []linState{s, {job: jobUnknown}}
		}
		return []linState{s}
	case "created":
		if !in.ownBody || s.job != "" {
			return nil
		}
		return advance(linState{job: out.job}, out)
	case "replayed":
		switch {
		case !in.ownBody:
			return nil
		case s.job == jobUnknown:
			s.job = out.job
		case s.job != out.job:
			return nil
		}
		return advance(s, out)
	case "refused":
		if in.ownBody || s.job == "" {
			return nil
		}
		return []linState{s}
	}
	return nil
}

// advance applies an answer's view of the job: its revision and state
// may only have moved forward, a terminal state not at all. (An attempt
// starts with a new revision, so the revision orders attempts too.)
func advance(s linState, out linOut) []linState {
	if out.rev != 0 {
		if out.rev < s.rev {
			return nil
		}
		s.rev = out.rev
	}
	if out.state != "" {
		r := rank(out.state)
		if r < s.rank || s.term != "" && out.state != s.term {
			return nil
		}
		s.rank = r
		if terminal(out.state) {
			s.term = out.state
		}
	}
	return []linState{s}
}

// linModel is the model starting from init: an empty key, or (a batch
// item's reads) a job created by its batch's call.
func linModel(init linState) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{init} },
		Step: func(state, input, output any) []any {
			next := linStep(state.(linState), input.(linOp), output.(linOut))
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		DescribeOperation: describeOp,
	}
	return m.ToModel()
}

func describeOp(input, output any) string {
	in, out := input.(linOp), output.(linOut)
	s := in.what + " → " + out.outcome
	if out.job != "" {
		s += " " + out.job
	}
	if out.state != "" || out.rev != 0 {
		s += fmt.Sprintf(" %s/%d rev %d", out.state, out.attempt, out.rev)
	}
	return s
}

// linPartition is the operations of one key, or of one batch item's reads.
type linPartition struct {
	name string
	ops  []porcupine.Operation
	// created: the partition starts with its job created (a batch item,
	// whose creating call is its batch key's).
	created bool
}

const infinity = math.MaxInt64

// linTimeout bounds Porcupine's search of one partition. A key's
// partition holds tens of calls and is decided in microseconds; the bound
// only keeps a pathological one from stalling the report.
const linTimeout = 10 * time.Second

func submitOp(e Entry, job string) (porcupine.Operation, bool) {
	in := linOp{kind: "submit", ownBody: e.Probe != "conflict", what: fmt.Sprintf("%s %s via %s at %s", e.Probe, e.Key, e.Gateway, e.Start.Format("15:04:05.000"))}
	op := porcupine.Operation{ClientId: e.Client, Input: in, Call: e.Start.UnixNano(), Return: e.End.UnixNano()}
	switch {
	case e.Err == "" && e.Status == 202:
		op.Output = linOut{outcome: "created", job: job, state: e.State, attempt: e.Attempt, rev: e.Rev}
	case e.Err == "" && e.Status == 200:
		op.Output = linOut{outcome: "replayed", job: job, state: e.State, attempt: e.Attempt, rev: e.Rev}
	case e.Err == "" && e.Status == 409:
		op.Output = linOut{outcome: "refused"}
	case e.Status == 429 || e.Err == "" && e.Status >= 400 && e.Status < 500:
		return op, false // refused before anything was written
	case e.Status/100 == 2:
		op.Output = linOut{outcome: "unknown"} // a 2xx whose body could not be read
		op.Return = infinity
	default:
		op.Output = linOut{outcome: "unknown"}
		op.Return = infinity
	}
	return op, true
}

func readOp(id, what string, start, end time.Time, status int, state string, attempt int, rev uint64) (porcupine.Operation, bool) {
	out := linOut{outcome: "found", state: state, attempt: attempt, rev: rev}
	switch {
	case status == 404:
		out = linOut{outcome: "missing"}
	case status != 200 && status != 202 && status != 304:
		return porcupine.Operation{}, false // no answer: a read changes nothing
	}
	return porcupine.Operation{Input: linOp{kind: "read", job: id, what: what}, Call: start.UnixNano(), Output: out, Return: end.UnixNano()}, true
}

// batchJob is the register value of a batch key: its id and item jobs.
func batchJob(e Entry) string {
	return e.Batch + "[" + strings.Join(itemIDs(e.Items), " ") + " ]"
}

// checkLinearizable builds the partitions from the history and runs
// Porcupine on each; timeout bounds each partition's search.
// The final read of the bucket happened between settled and end (an
// entry without a time of its own is read as the whole span).
func (c *checker) checkLinearizable(submits, batchSubmits map[scopedKey][]Entry, obs, cancels map[string][]Entry, finals map[string]Entry, settled, end time.Time, timeout time.Duration) {
	parts := linPartitions(submits, batchSubmits, obs, cancels, finals, settled, end)
	fresh, created := linModel(linState{}), linModel(linState{job: jobUnknown})
	ops, unknown := 0, 0
	for _, p := range parts {
		ops += len(p.ops)
		model := fresh
		if p.created {
			model = created
		}
		switch porcupine.CheckOperationsTimeout(model, p.ops, timeout) {
		case porcupine.Illegal:
			c.anomaly("not-linearizable", "%s: no order of its %d calls respects real time and the key→job model: %s", p.name, len(p.ops), describeOps(p.ops, 12))
		case porcupine.Unknown:
			unknown++
		}
	}
	if unknown > 0 {
		c.note("linearizability: %d of %d partitions not decided within %s each", unknown, len(parts), timeout)
	}
	c.sum("linearizability (Porcupine, key→job register): %d partitions, %d operations", len(parts), ops)
}

func linPartitions(submits, batchSubmits map[scopedKey][]Entry, obs, cancels map[string][]Entry, finals map[string]Entry, settled, end time.Time) []linPartition {
	var parts []linPartition
	jobOf := map[string]int{} // job id → index of the partition its reads go to
	add := func(name string, es []Entry, value func(Entry) string, jobs func(Entry) []string) {
		p := linPartition{name: name}
		for _, e := range es {
			if op, ok := submitOp(e, value(e)); ok {
				p.ops = append(p.ops, op)
			}
			if e.Status/100 == 2 && e.Err == "" && e.Probe != "conflict" {
				for _, j := range jobs(e) {
					if _, ok := jobOf[j]; !ok {
						jobOf[j] = len(parts)
					}
				}
			}
		}
		parts = append(parts, p)
	}
	for k, es := range inKeyOrder(submits) {
		// A single job's reads share its key's partition: a 404 after its
		// creation or a read of another job is then illegal.
		add(fmt.Sprintf("key %s/%s", k.requester, k.key), es,
			func(e Entry) string { return e.Job },
			func(e Entry) []string { return []string{e.Job} })
	}
	for k, es := range inKeyOrder(batchSubmits) {
		add(fmt.Sprintf("batch key %s/%s", k.requester, k.key), es, batchJob, func(e Entry) []string { return itemIDs(e.Items) })
	}
	// A batch item's reads are a partition of their own that starts with
	// the item created: the batch's register (above) holds the item list,
	// and one partition per item keeps each search small.
	itemPart := map[string]int{}
	for i := range parts {
		if !strings.HasPrefix(parts[i].name, "batch key ") {
			continue
		}
		for j, at := range jobOf {
			if at == i {
				itemPart[j] = -1
			}
		}
	}
	readInto := func(id string, op porcupine.Operation) {
		at, ok := jobOf[id]
		if !ok {
			return // a job no key was answered with: unacknowledged-job's
		}
		if _, item := itemPart[id]; item {
			if itemPart[id] < 0 {
				itemPart[id] = len(parts)
				parts = append(parts, linPartition{name: "batch item " + id, created: true})
			}
			at = itemPart[id]
		}
		parts[at].ops = append(parts[at].ops, op)
	}
	for _, k := range sortedJobKeys(jobOf) {
		for _, e := range obs[k] {
			if e.Err != "" {
				continue
			}
			if op, ok := readOp(k, e.Via+" via "+e.Gateway, e.Start, e.End, e.Status, e.State, e.Attempt, e.Rev); ok {
				readInto(k, op)
			}
		}
		for _, e := range cancels[k] {
			if e.Status == 202 && e.Err == "" {
				if op, ok := readOp(k, "cancel answer via "+e.Gateway, e.Start, e.End, 200, e.State, e.Attempt, e.Rev); ok {
					readInto(k, op)
				}
			}
		}
		if f, ok := finals[k]; ok {
			from, to := f.T, f.T
			if f.T.IsZero() {
				from, to = settled, end
			}
			if op, ok := readOp(k, "final read of the bucket", from, to, 200, f.State, f.Attempt, f.Rev); ok {
				readInto(k, op)
			}
		}
	}
	return parts
}

func sortedJobKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// describeOps lists up to n operations in call order, for the report.
func describeOps(ops []porcupine.Operation, n int) string {
	s := append([]porcupine.Operation(nil), ops...)
	sort.Slice(s, func(i, j int) bool { return s[i].Call < s[j].Call })
	var parts []string
	for i, op := range s {
		if i == n {
			parts = append(parts, fmt.Sprintf("... %d more", len(s)-n))
			break
		}
		parts = append(parts, describeOp(op.Input, op.Output))
	}
	return strings.Join(parts, "; ")
}
