package chaos

import (
	"fmt"
	"iter"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Report is the checker's verdict on one history.
type Report struct {
	Seed      uint64
	Anomalies []string // "kind: detail"; a passing run has none
	// Known are anomalies of kinds listed in KnownIssues: broken promises
	// already found and written down, reported without failing the run
	// (unless the check is strict).
	Known   []string
	Notes   []string // worth knowing, not a broken promise
	Summary []string
}

// AnomalyKinds counts the anomalies per kind.
func (r *Report) AnomalyKinds() map[string]int {
	out := map[string]int{}
	for _, a := range r.Anomalies {
		k, _, _ := strings.Cut(a, ":")
		out[k]++
	}
	return out
}

// KnownIssues are the anomaly kinds the chaos test has found in jobgate and
// that are not fixed yet, with the cause; Check reports them as known
// rather than failing, unless asked to be strict. Remove an entry with the
// fix (docs/reliability.md, known issues: what was found and fixed).
var KnownIssues = map[string]string{}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run, seed %d\n", r.Seed)
	for _, s := range r.Summary {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	if len(r.Known) > 0 {
		kinds := map[string]int{}
		for _, a := range r.Known {
			k, _, _ := strings.Cut(a, ":")
			kinds[k]++
		}
		fmt.Fprintf(&b, "known issues (not failing): %d %v\n", len(r.Known), kinds)
		for k := range kinds {
			fmt.Fprintf(&b, "  %s: %s\n", k, KnownIssues[k])
		}
		for i, a := range r.Known {
			if i == 10 {
				fmt.Fprintf(&b, "  ... %d more\n", len(r.Known)-i)
				break
			}
			fmt.Fprintf(&b, "  %s\n", a)
		}
	}
	fmt.Fprintf(&b, "anomalies: %d", len(r.Anomalies))
	if len(r.Anomalies) > 0 {
		fmt.Fprintf(&b, " %v (replay with seed %d)", r.AnomalyKinds(), r.Seed)
	}
	b.WriteString("\n")
	for i, a := range r.Anomalies {
		if i == 100 {
			fmt.Fprintf(&b, "  ... %d more\n", len(r.Anomalies)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", a)
	}
	return b.String()
}

type checker struct {
	rep    *Report
	bound  time.Duration
	strict bool
}

func (c *checker) anomaly(kind, format string, args ...any) {
	a := kind + ": " + fmt.Sprintf(format, args...)
	if _, known := KnownIssues[kind]; known && !c.strict {
		c.rep.Known = append(c.rep.Known, a)
		return
	}
	c.rep.Anomalies = append(c.rep.Anomalies, a)
}

func (c *checker) note(format string, args ...any) {
	c.rep.Notes = append(c.rep.Notes, fmt.Sprintf(format, args...))
}

func (c *checker) sum(format string, args ...any) {
	c.rep.Summary = append(c.rep.Summary, fmt.Sprintf(format, args...))
}

type scopedKey struct{ requester, key string }

// Check reads a history (the clients', nemesis' and sinks' records and
// the final state) and reports every broken promise. bound is how long
// after the faults stopped every job had to be terminal. Anomalies of the
// KnownIssues kinds are reported apart, as known, unless strict.
func Check(entries []Entry, bound time.Duration, strict bool) *Report {
	c := &checker{rep: &Report{}, bound: bound, strict: strict}
	var (
		faultsStopped, settled        time.Time
		faultsStart, endAt            time.Time
		submits                       = map[scopedKey][]Entry{}
		obs                           = map[string][]Entry{}
		cancels                       = map[string][]Entry{}
		finals                        = map[string]Entry{}
		objects                       = map[string]Entry{}
		events                        = map[string][]Entry{}
		lists                         = map[string][]Entry{}
		hooks, mails, fetches, faults []Entry
		ended, eventsRead             bool
		batchSubmits                  = map[scopedKey][]Entry{}
		finalBatches                  = map[string]Entry{}
		batchesRead                   bool
		works                         []Entry
	)
	for _, e := range entries {
		switch e.Kind {
		case "phase":
			switch e.Phase {
			case "start":
				c.rep.Seed = e.Seed
			case "faults-start":
				faultsStart = e.T
			case "faults-stopped":
				faultsStopped = e.T
			case "settled":
				settled = e.T
			case "end":
				ended, endAt = true, e.T
			case "events-read":
				eventsRead = true
			case "batches-read":
				batchesRead = true
			case "snapshot-error":
				c.anomaly("final-state-unreadable", "%s", e.Err)
			}
		case "submit":
			k := scopedKey{e.Requester, e.Key}
			submits[k] = append(submits[k], e)
		case "gave-up":
			c.anomaly("submission-unanswered", "%s key %s (%s): no definitive answer within the bound; %s", e.Requester, e.Key, e.Probe, e.Note)
		case "batch-submit":
			k := scopedKey{e.Requester, e.Key}
			batchSubmits[k] = append(batchSubmits[k], e)
		case "batch-gave-up":
			c.anomaly("submission-unanswered", "%s batch key %s (%s): no definitive answer within the bound; %s", e.Requester, e.Key, e.Probe, e.Note)
		case "final-batch":
			finalBatches[e.Batch] = e
		case "obs":
			obs[e.Job] = append(obs[e.Job], e)
		case "cancel":
			cancels[e.Job] = append(cancels[e.Job], e)
		case "fault":
			faults = append(faults, e)
			if e.Action == "restart" && e.Err != "" {
				c.anomaly("restart-failed", "%s at %s: %s", e.Target, e.T.Format(time.RFC3339Nano), e.Err)
			}
			if e.Action == "heal" && e.Err != "" {
				c.anomaly("heal-failed", "the network was not healed at %s: %s", e.T.Format(time.RFC3339Nano), e.Err)
			}
		case "exit":
			c.anomaly("process-exit", "%s exited without being killed at %s: %s", e.Target, e.T.Format(time.RFC3339Nano), e.Note)
		case "webhook":
			hooks = append(hooks, e)
		case "mail":
			mails = append(mails, e)
		case "final-job":
			finals[e.Job] = e
		case "final-object":
			objects[e.Name] = e
		case "final-event":
			events[e.Job] = append(events[e.Job], e)
		case "final-list":
			lists[e.Requester] = append(lists[e.Requester], e)
		case "fetch":
			fetches = append(fetches, e)
		case "work":
			works = append(works, e)
		}
	}
	if !ended {
		c.anomaly("incomplete-history", "the run did not reach its end (no final state)")
	}
	acked := c.checkKeys(submits)
	batches := c.checkBatchKeys(batchSubmits)
	ackedIDs := c.ackedJobs(acked, batches)
	c.checkJobs(ackedIDs, finals, faultsStopped)
	c.checkOrder(obs, submits, batchSubmits, cancels, finals)
	c.checkLinearizable(submits, batchSubmits, obs, cancels, finals, settled, endAt, linTimeout)
	c.checkCancels(cancels, finals)
	c.checkResults(finals, objects, fetches)
	if eventsRead {
		c.checkEvents(finals, events)
		c.checkPublished(obs, events)
	} else {
		c.note("the events stream was not read: event checks skipped")
	}
	c.checkBatchItems(batches, finals, finalBatches, batchesRead)
	c.checkNotices(finals, hooks, mails, events)
	c.checkBatchNotices(batches, finals, hooks, mails)
	c.checkCounts(ackedIDs, finals, lists)
	c.checkScheduled(finals)
	c.checkFlow(finals, works)
	c.checkRate(finals)
	c.summarize(faultsStart, faultsStopped, settled, faults, submits, obs, finals, hooks, mails, events, objects)
	c.summarizeBatches(batchSubmits, batches, hooks, mails)
	return c.rep
}

// inKeyOrder yields each key's requests, the keys in a stable order and
// each key's requests in the order they started (the report reads the
// same run the same way).
func inKeyOrder(submits map[scopedKey][]Entry) iter.Seq2[scopedKey, []Entry] {
	return func(yield func(scopedKey, []Entry) bool) {
		keys := make([]scopedKey, 0, len(submits))
		for k := range submits {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].requester+keys[i].key < keys[j].requester+keys[j].key })
		for _, k := range keys {
			es := submits[k]
			sort.Slice(es, func(i, j int) bool { return es[i].Start.Before(es[j].Start) })
			if !yield(k, es) {
				return
			}
		}
	}
}

// checkKeys: every key that got a 2xx maps to one job; keys never share a
// job; misuse of a key never admits. It returns the acknowledged job id
// of every key.
func (c *checker) checkKeys(submits map[scopedKey][]Entry) map[scopedKey]string {
	acked := map[scopedKey]string{}
	jobKeys := map[string][]scopedKey{}
	for k, es := range inKeyOrder(submits) {
		ids := map[string]bool{}
		created := 0
		for i, e := range es {
			definitive := e.Err == "" && e.Status != 429 && e.Status < 500
			switch {
			case e.Probe == "conflict":
				if definitive && e.Status != 409 {
					c.anomaly("key-reuse-not-refused", "%s key %s with another body answered %d (job %s) via %s, want 409", k.requester, k.key, e.Status, e.Job, e.Gateway)
				}
				continue
			case !definitive:
				continue
			case e.Status/100 != 2:
				c.anomaly("submit-refused", "%s key %s (%s) answered %d via %s", k.requester, k.key, e.Probe, e.Status, e.Gateway)
				continue
			}
			if e.Job == "" {
				c.anomaly("submit-without-job", "%s key %s answered %d without a job id: %s", k.requester, k.key, e.Status, e.Err)
				continue
			}
			ids[e.Job] = true
			if e.Status == 202 {
				created++
			}
			if i == 0 && e.Replayed {
				c.anomaly("replay-of-new-key", "%s key %s: its very first request answered %d replayed (job %s)", k.requester, k.key, e.Status, e.Job)
			}
			if e.Status == 202 && e.Replayed {
				c.anomaly("replay-header-on-202", "%s key %s", k.requester, k.key)
			}
			if e.Status == 200 && !e.Replayed {
				c.anomaly("200-without-replay-header", "%s key %s", k.requester, k.key)
			}
		}
		if len(ids) > 1 {
			c.anomaly("key-two-jobs", "%s key %s got 2xx answers naming %d jobs: %v", k.requester, k.key, len(ids), sortedKeys(ids))
		}
		if created > 1 {
			c.anomaly("key-created-twice", "%s key %s answered 202 Accepted %d times", k.requester, k.key, created)
		}
		for id := range ids {
			acked[k] = id
			jobKeys[id] = append(jobKeys[id], k)
		}
	}
	for id, ks := range jobKeys {
		if len(ks) > 1 {
			c.anomaly("job-two-keys", "job %s was answered for %d keys: %v", id, len(ks), ks)
		}
	}
	return acked
}

// checkJobs: every acknowledged job (a batch's items included) is stored,
// every stored job was acknowledged, one job (or one batch) per key hash,
// all terminal within the bound.
func (c *checker) checkJobs(ackedIDs map[string]scopedKey, finals map[string]Entry, faultsStopped time.Time) {
	for id, k := range ackedIDs {
		if _, ok := finals[id]; !ok {
			c.anomaly("acked-job-lost", "job %s (%s key %s) was acknowledged but is not in the bucket", id, k.requester, k.key)
		}
	}
	// A batch's items share its key's hash: the batch is the one owner.
	byHash := map[string]map[string]bool{}
	lostWorkers := 0
	for id, f := range finals {
		if f.State == "failed" {
			// Every submitted job is valid and renderable, and the faults
			// leave a quorum up: an outage delays jobs, it never fails them.
			// Only a worker lost on every attempt may end a job.
			if f.Error == "worker_lost" || f.Error == "exhausted" {
				lostWorkers++
			} else {
				c.anomaly("job-failed", "job %s failed %s in attempt %d: %s", id, f.Error, f.Attempt, f.Note)
			}
		}
		if _, ok := ackedIDs[id]; !ok {
			c.anomaly("unacknowledged-job", "job %s (%s, %s) is in the bucket but no client got an answer naming it", id, f.Requester, f.State)
		}
		if f.KeyHash != "" {
			h := f.Requester + "/" + f.KeyHash
			if byHash[h] == nil {
				byHash[h] = map[string]bool{}
			}
			owner := id
			if f.Batch != "" {
				owner = f.Batch
			}
			byHash[h][owner] = true
		}
		if !terminal(f.State) {
			c.anomaly("not-terminal", "job %s is %s (attempt %d) %s after the faults stopped", id, f.State, f.Attempt, c.bound)
		} else if !faultsStopped.IsZero() && !f.Finished.IsZero() && f.Finished.After(faultsStopped.Add(c.bound)) {
			c.anomaly("terminal-late", "job %s finished %s after the faults stopped (bound %s)", id, f.Finished.Sub(faultsStopped).Round(time.Millisecond), c.bound)
		}
	}
	if lostWorkers > 0 {
		c.note("%d jobs failed worker_lost or exhausted: their worker was killed or frozen on every attempt", lostWorkers)
	}
	for h, ids := range byHash {
		if len(ids) > 1 {
			c.anomaly("key-hash-two-jobs", "key hash %s has %d jobs (or batches): %v", h, len(ids), sortedKeys(ids))
		}
	}
}

// point is one observation of a job at a time interval.
type point struct {
	start, end time.Time
	state      string // empty: revision only (304, sse-end)
	attempt    int
	rev        uint64
	what       string
}

func (p point) String() string {
	return fmt.Sprintf("%s %s/attempt %d/rev %d at %s", p.what, p.state, p.attempt, p.rev, p.end.Format("15:04:05.000"))
}

// checkOrder: as seen by polls, SSE and answers, a job's state, attempt
// and revision never go back: an observation that began after another
// ended never shows less; a terminal state never changes; within one SSE
// connection ids strictly increase; the final record is at least what
// anyone saw.
func (c *checker) checkOrder(obs map[string][]Entry, submits, batchSubmits map[scopedKey][]Entry, cancels map[string][]Entry, finals map[string]Entry) {
	points := map[string][]point{}
	for _, es := range submits {
		for _, e := range es {
			if e.Status/100 == 2 && e.Job != "" && e.Probe != "conflict" {
				points[e.Job] = append(points[e.Job], point{e.Start, e.End, e.State, e.Attempt, e.Rev, "submit answer via " + e.Gateway})
			}
		}
	}
	// A batch's answer gives each item's state (no attempt, no revision).
	for _, es := range batchSubmits {
		for _, e := range es {
			if e.Status/100 == 2 && e.Probe != "conflict" {
				for _, it := range e.Items {
					points[it.ID] = append(points[it.ID], point{e.Start, e.End, it.State, 0, 0, "batch answer via " + e.Gateway})
				}
			}
		}
	}
	for id, es := range cancels {
		for _, e := range es {
			if e.Status == 202 {
				points[id] = append(points[id], point{e.Start, e.End, e.State, e.Attempt, e.Rev, "cancel answer via " + e.Gateway})
			}
		}
	}
	for id, es := range obs {
		lastInConn := map[string]uint64{}
		for _, e := range es {
			if e.Status == 404 {
				c.anomaly("acked-job-not-found", "job %s answered 404 to a %s via %s at %s", id, e.Via, e.Gateway, e.End.Format(time.RFC3339Nano))
				continue
			}
			if e.Err != "" {
				c.anomaly("bad-job-body", "job %s: %s via %s: %s", id, e.Via, e.Gateway, e.Err)
				continue
			}
			if e.Via == "sse" {
				conn := fmt.Sprintf("%d/%s", e.Client, e.Note)
				if prev, ok := lastInConn[conn]; ok && e.Rev <= prev {
					c.anomaly("sse-id-not-increasing", "job %s: %s via %s sent id %d after %d", id, e.Note, e.Gateway, e.Rev, prev)
				}
				lastInConn[conn] = e.Rev
			}
			points[id] = append(points[id], point{e.Start, e.End, e.State, e.Attempt, e.Rev, e.Via + " via " + e.Gateway})
		}
	}
	for id, ps := range points {
		sort.Slice(ps, func(i, j int) bool { return ps[i].end.Before(ps[j].end) })
		// Prefix maxima over the observations sorted by end.
		type best struct {
			rank, attempt       int
			rev                 uint64
			byRank, byRev, term *point
		}
		pre := make([]best, len(ps))
		var cur best
		for i := range ps {
			p := &ps[i]
			if p.state != "" {
				if r := rank(p.state); r > cur.rank {
					cur.rank, cur.byRank = r, p
				}
				cur.attempt = max(cur.attempt, p.attempt)
				if terminal(p.state) && cur.term == nil {
					cur.term = p
				}
			}
			if p.rev > cur.rev {
				cur.rev, cur.byRev = p.rev, p
			}
			pre[i] = cur
		}
		reported := false
		for _, p := range ps {
			// Observations that ended before p began.
			n := sort.Search(len(ps), func(i int) bool { return !ps[i].end.Before(p.start) })
			if n == 0 || reported {
				continue
			}
			b := pre[n-1]
			switch {
			case p.rev != 0 && p.rev < b.rev:
				c.anomaly("revision-backwards", "job %s: %s after %s", id, p, b.byRev)
				reported = true
			case p.state != "" && rank(p.state) < b.rank:
				c.anomaly("state-backwards", "job %s: %s after %s", id, p, b.byRank)
				reported = true
			case p.state != "" && b.term != nil && p.state != b.term.state:
				c.anomaly("terminal-state-changed", "job %s: %s after %s", id, p, b.term)
				reported = true
			}
		}
		if f, ok := finals[id]; ok && len(ps) > 0 {
			last := pre[len(ps)-1]
			switch {
			case f.Rev < last.rev:
				c.anomaly("final-behind-observed", "job %s: the bucket holds rev %d (%s) but %s was seen", id, f.Rev, f.State, last.byRev)
			case last.term != nil && f.State != last.term.state:
				c.anomaly("terminal-state-changed", "job %s: final %s after %s", id, f.State, last.term)
			}
		}
	}
}

// checkCancels: a cancel answered 202 ends the job canceled.
func (c *checker) checkCancels(cancels map[string][]Entry, finals map[string]Entry) {
	for id, es := range cancels {
		for _, e := range es {
			if e.Status == 202 {
				if f, ok := finals[id]; ok && f.State != "canceled" {
					c.anomaly("cancel-lost", "job %s: DELETE answered 202 via %s at %s, but the job ended %s", id, e.Gateway, e.End.Format(time.RFC3339Nano), f.State)
				}
				break
			}
		}
	}
}

// checkResults: one result object per succeeded job, matching its record;
// downloads through the gateway match too.
func (c *checker) checkResults(finals map[string]Entry, objects map[string]Entry, fetches []Entry) {
	used := map[string]bool{}
	for id, f := range finals {
		if f.State != "succeeded" {
			continue
		}
		if f.Object == "" {
			c.anomaly("result-missing", "succeeded job %s names no result object", id)
			continue
		}
		used[f.Object] = true
		o, ok := objects[f.Object]
		switch {
		case !ok:
			c.anomaly("result-missing", "succeeded job %s: object %s is not in the store", id, f.Object)
		case o.Size != f.Size || o.Digest != f.Digest:
			c.anomaly("result-mismatch", "job %s: object %s is %d bytes sha256 %s, the record says %d bytes %s", id, f.Object, o.Size, o.Digest, f.Size, f.Digest)
		}
	}
	orphans := 0
	for name := range objects {
		if !used[name] {
			orphans++
		}
	}
	if orphans > 0 {
		c.note("%d result objects belong to no succeeded job (an attempt stored its result, then the job failed or was canceled; they expire with the result TTL)", orphans)
	}
	for _, e := range fetches {
		f := finals[e.Job]
		if e.Status != 200 || e.Err != "" || e.Digest != f.Digest {
			c.anomaly("result-download", "job %s: download answered %d (%s), %d bytes sha256 %s, want %s", e.Job, e.Status, e.Err, e.Size, e.Digest, f.Digest)
		}
	}
}

// checkEvents: per job, the published changes never go back, a change
// (one Nats-Msg-Id) is published with one content however often it is
// copied, and a terminal job has exactly one terminal change, the one it
// ended in.
func (c *checker) checkEvents(finals map[string]Entry, events map[string][]Entry) {
	for id, f := range finals {
		es := events[id]
		sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
		seen := map[string]Entry{}
		var terms []string
		var prev *Entry
		for _, e := range es {
			if first, ok := seen[e.MsgID]; ok {
				if first.State != e.State || first.Attempt != e.Attempt {
					c.anomaly("event-copy-differs", "job %s: change %s published as %s/%d and %s/%d", id, e.MsgID, first.State, first.Attempt, e.State, e.Attempt)
				}
				continue // a copy (after a crash) of a change already published
			}
			seen[e.MsgID] = e
			if prev != nil && (rank(e.State) < rank(prev.State) || e.Attempt < prev.Attempt || revBefore(e.MsgID, prev.MsgID)) {
				c.anomaly("events-backwards", "job %s: event %s (seq %d) after %s (seq %d)", id, e.MsgID, e.Seq, prev.MsgID, prev.Seq)
			}
			if terminal(e.State) {
				terms = append(terms, e.MsgID)
				if e.State != f.State {
					c.anomaly("terminal-event-state", "job %s ended %s but event %s says %s", id, f.State, e.MsgID, e.State)
				}
			}
			e := e
			prev = &e
		}
		switch {
		case terminal(f.State) && len(terms) == 0:
			c.anomaly("terminal-event-missing", "job %s ended %s but no terminal change was published (%d events)", id, f.State, len(es))
		case len(terms) > 1:
			c.anomaly("terminal-transition-twice", "job %s: %d terminal changes published: %v", id, len(terms), terms)
		}
	}
}

// revBefore reports whether change id a names an earlier record revision
// than b, where both are <job>.<revision> (the contract's event ids).
func revBefore(a, b string) bool {
	ra, okA := msgRev(a)
	rb, okB := msgRev(b)
	return okA && okB && ra < rb
}

func msgRev(id string) (uint64, bool) {
	i := strings.LastIndexByte(id, '.')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	return n, err == nil
}

// checkPublished: every version of a job a reader saw is a stored change
// and so, by the contract, published on JOBGATE_EVENTS. A terminal state
// nobody published is an anomaly. Earlier versions that were not published
// are counted in notes, for two known causes: the job records are a KV
// bucket with history 1, so a version superseded before the dispatcher's
// relay read it (a cancel 10 ms after admission, or any change while the
// relay is down) is gone from the stream it relays; and events are
// de-duplicated per state and attempt (Nats-Msg-Id <job>.<state>.<attempt>),
// so only the first progress step of an attempt is published.
func (c *checker) checkPublished(obs map[string][]Entry, events map[string][]Entry) {
	var progress, superseded, progressJobs, supersededJobs int
	var progressEx, supersededEx string
	for id, es := range obs {
		published := map[string]bool{}
		for _, e := range events[id] {
			published[fmt.Sprintf("%s/%d", e.State, e.Attempt)] = true
			published[fmt.Sprintf("%s/%d/%d", e.State, e.Attempt, e.Done)] = true
		}
		var p, s bool
		for _, e := range es {
			if e.State == "" || e.Status != 200 || e.Err != "" {
				continue
			}
			switch {
			case !published[fmt.Sprintf("%s/%d", e.State, e.Attempt)] && terminal(e.State):
				c.anomaly("change-not-published", "job %s: %s attempt %d seen by %s via %s at %s, no such event", id, e.State, e.Attempt, e.Via, e.Gateway, e.End.Format(time.RFC3339Nano))
			case !published[fmt.Sprintf("%s/%d", e.State, e.Attempt)]:
				superseded++
				s = true
				if supersededEx == "" {
					supersededEx = fmt.Sprintf("job %s %s attempt %d (rev %d) seen at %s", id, e.State, e.Attempt, e.Rev, e.End.Format(time.RFC3339Nano))
				}
			case !published[fmt.Sprintf("%s/%d/%d", e.State, e.Attempt, e.Done)]:
				progress++
				p = true
				if progressEx == "" {
					progressEx = fmt.Sprintf("job %s %s attempt %d progress %d", id, e.State, e.Attempt, e.Done)
				}
			}
		}
		if p {
			progressJobs++
		}
		if s {
			supersededJobs++
		}
	}
	if superseded > 0 {
		c.note("%d observed states of %d jobs were never published as events: superseded before the relay read them (history-1 bucket), e.g. %s", superseded, supersededJobs, supersededEx)
	}
	if progress > 0 {
		c.note("%d observed progress steps of %d jobs were never published as events (contract: one event per progress change), e.g. %s", progress, progressJobs, progressEx)
	}
}

// checkNotices: webhooks are signed, carry the id of the published change
// they tell of, one id per change (the same
// data under one id, one id per data), and every terminal change was
// delivered; at most one mail per job and state, naming the final state.
// A batch's own notices, and the items of a batch notified as one, which
// get none of their own, are checkBatchNotices' (signatures and one
// payload per id hold for every delivery alike).
func (c *checker) checkNotices(finals map[string]Entry, hooks, mails []Entry, events map[string][]Entry) {
	eventIDs := map[string]bool{}
	for _, es := range events {
		for _, e := range es {
			eventIDs[e.MsgID] = true
		}
	}
	byID := map[string]Entry{}
	idsByData := map[string]map[string]bool{}
	deliveredTerm := map[string]bool{}
	for _, e := range hooks {
		if !e.SigOK {
			c.anomaly("webhook-bad-signature", "delivery %s of job %s", e.WebhookID, e.Job+e.Batch)
		}
		if prev, ok := byID[e.WebhookID]; ok && prev.Digest != e.Digest {
			c.anomaly("webhook-id-reused", "id %s carried two different payloads (%s/%d and %s/%d)", e.WebhookID, prev.State, prev.Attempt, e.State, e.Attempt)
		}
		byID[e.WebhookID] = e
		if isBatchNotice(e) {
			continue
		}
		if e.Job == "" || !strings.HasPrefix(e.WebhookID, e.Job+".") {
			c.anomaly("webhook-id-format", "delivery id %q for job %q", e.WebhookID, e.Job)
		}
		if len(eventIDs) > 0 && !eventIDs[e.WebhookID] {
			c.anomaly("webhook-unknown-change", "delivery id %s of job %s is no published event's id", e.WebhookID, e.Job)
		}
		k := e.Job + "/" + e.Digest
		if idsByData[k] == nil {
			idsByData[k] = map[string]bool{}
		}
		idsByData[k][e.WebhookID] = true
		if f, ok := finals[e.Job]; ok && terminal(e.State) && e.State != f.State {
			c.anomaly("webhook-wrong-state", "job %s ended %s but webhook %s says %s", e.Job, f.State, e.WebhookID, e.State)
		}
		if e.Status/100 == 2 && terminal(e.State) {
			deliveredTerm[e.Job+"/"+e.State] = true
		}
	}
	for k, ids := range idsByData {
		if len(ids) > 1 {
			c.anomaly("webhook-two-ids", "one change of job %s delivered under %d ids: %v", strings.SplitN(k, "/", 2)[0], len(ids), sortedKeys(ids))
		}
	}
	for id, f := range finals {
		if terminal(f.State) && f.Notify != "batch" && !deliveredTerm[id+"/"+f.State] {
			c.anomaly("webhook-terminal-missing", "job %s ended %s; no delivery of that change was accepted", id, f.State)
		}
	}
	perMsg := map[string]int{}
	for _, m := range mails {
		if m.Batch != "" {
			continue
		}
		perMsg[m.MessageID]++
		if f, ok := finals[m.Job]; !ok {
			c.anomaly("mail-unknown-job", "mail %s names no job in the bucket", m.MessageID)
		} else if m.State != f.State {
			c.anomaly("mail-wrong-state", "mail %s, but job %s ended %s", m.MessageID, m.Job, f.State)
		}
	}
	for id, n := range perMsg {
		if n > 1 {
			c.anomaly("mail-twice", "mail %s sent %d times", id, n)
		}
	}
	missing := 0
	for id, f := range finals {
		if terminal(f.State) && f.Notify != "batch" && perMsg[id+"."+f.State+"@jobgate"] == 0 {
			missing++
		}
	}
	if missing > 0 {
		c.note("%d terminal jobs got no mail (mail is at most once: a notifier killed mid-send leaves its claim and sends none)", missing)
	}
}

// checkCounts: the jobs the clients were told about (a batch's items
// included), the bucket and each requester's GET /v1/jobs agree, state by
// state.
func (c *checker) checkCounts(ackedIDs map[string]scopedKey, finals map[string]Entry, lists map[string][]Entry) {
	for _, rq := range requesters {
		clientJobs := map[string]bool{}
		for id, k := range ackedIDs {
			if k.requester == rq {
				clientJobs[id] = true
			}
		}
		bucket := 0
		for _, f := range finals {
			if f.Requester == rq {
				bucket++
			}
		}
		listed := map[string]string{}
		for _, e := range lists[rq] {
			if _, dup := listed[e.Job]; dup {
				c.anomaly("list-duplicate", "%s: GET /v1/jobs listed job %s twice", rq, e.Job)
			}
			listed[e.Job] = e.State
			if f, ok := finals[e.Job]; !ok {
				c.anomaly("list-unknown-job", "%s: GET /v1/jobs listed job %s, which is not in the bucket", rq, e.Job)
			} else if f.State != e.State {
				c.anomaly("list-state-mismatch", "%s: job %s listed %s, the bucket says %s", rq, e.Job, e.State, f.State)
			}
		}
		if len(clientJobs) != bucket || bucket != len(listed) {
			c.anomaly("count-mismatch", "%s: clients were answered %d jobs, the bucket holds %d, GET /v1/jobs lists %d", rq, len(clientJobs), bucket, len(listed))
		}
	}
}

func (c *checker) summarize(start, faultsStopped, settled time.Time, faults []Entry, submits map[scopedKey][]Entry,
	obs map[string][]Entry, finals map[string]Entry, hooks, mails []Entry, events map[string][]Entry, objects map[string]Entry) {
	byKind := map[string]int{}
	injected := 0
	for _, f := range faults {
		kind := strings.TrimRight(strings.SplitN(f.Target, "-", 2)[0], "0123456789")
		switch f.Action {
		case "kill", "stop":
			if f.Err == "" {
				injected++
				byKind[map[string]string{"kill": "SIGKILL", "stop": "SIGSTOP"}[f.Action]+" "+kind]++
			}
		case actPowerLoss:
			if f.Err == "" {
				injected++
				byKind["power loss "+kind]++
			}
		case actPartition, actIsolateLeader, actCut:
			if f.Err == "" {
				injected++
				byKind[f.Action]++
			}
		case "skip":
			byKind["skipped (cluster not healthy)"]++
		}
	}
	if !faultsStopped.IsZero() {
		c.sum("faults phase %s, settled %s after the faults stopped", faultsStopped.Sub(start).Round(time.Second), settled.Sub(faultsStopped).Round(time.Second))
	}
	c.sum("faults injected: %d %s", injected, fmtCounts(byKind))
	attempts, keys := 0, map[string]int{}
	status := map[string]int{}
	for _, es := range submits {
		keys["keys"]++
		for _, e := range es {
			if e.Probe != "new" && (e.Status/100 == 2 || e.Status == 409) {
				keys[e.Probe+" answered"]++
			}
			attempts++
			switch {
			case e.Err != "" && e.Status == 0:
				status["no answer"]++
			default:
				status[fmt.Sprint(e.Status)]++
			}
		}
	}
	c.sum("submissions: %d HTTP requests %s; %s", attempts, fmtCounts(status), fmtCounts(keys))
	nObs := map[string]int{}
	for _, es := range obs {
		for _, e := range es {
			nObs[e.Via]++
		}
	}
	states, multi := map[string]int{}, 0
	for _, f := range finals {
		s := f.State
		if f.Error != "" {
			s += "/" + f.Error
		}
		states[s]++
		if f.Attempt > 1 {
			multi++
		}
	}
	c.sum("jobs: %d %s, %d took more than one attempt; observations %s", len(finals), fmtCounts(states), multi, fmtCounts(nObs))
	ids := map[string]bool{}
	for _, h := range hooks {
		ids[h.WebhookID] = true
	}
	nEvents := 0
	for _, es := range events {
		nEvents += len(es)
	}
	c.sum("events %d; webhook deliveries %d (%d ids); mails %d; result objects %d", nEvents, len(hooks), len(ids), len(mails), len(objects))
}

func fmtCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkScheduled: no attempt of a scheduled job (one admitted with a
// run_at ahead) started before its run_at, as its record's attempts say.
// That each reaches a terminal state is checkJobs' not-terminal, as for
// every job.
func (c *checker) checkScheduled(finals map[string]Entry) {
	n, done := 0, 0
	for id, f := range finals {
		if f.RunAt.IsZero() {
			continue
		}
		n++
		if terminal(f.State) {
			done++
		}
		for i, st := range f.Starts {
			if st.Before(f.RunAt) {
				c.anomaly("scheduled-started-early", "job %s: attempt %d started at %s, before its run_at %s", id, i+1,
					st.Format(time.RFC3339Nano), f.RunAt.Format(time.RFC3339Nano))
				break
			}
		}
	}
	if n > 0 {
		c.sum("scheduled jobs: %d, %d of them ended", n, done)
	}
}

// checkFlow: the flow-limited type's concurrency key held: no two jobs of
// one customer ran at once beyond flowLimit. It judges the attempts that
// succeeded (the attempt the final record names), as their handler ran
// them: such an attempt held its claim from its start to its verdict,
// and so its place, taken before the claim and given back after the
// verdict (an attempt taken over while its worker ran on gave its place
// to the next and was refused its verdict; docs/workers.md says a lost
// place is not taken from a running attempt).
func (c *checker) checkFlow(finals map[string]Entry, works []Entry) {
	type span struct {
		job        string
		start, end time.Time
	}
	byKey := map[string][]span{}
	ran := 0
	for _, w := range works {
		f, ok := finals[w.Job]
		if !ok || f.State != "succeeded" || f.Attempt != w.Attempt {
			continue
		}
		ran++
		byKey[w.FlowKey] = append(byKey[w.FlowKey], span{w.Job, w.Start, w.End})
	}
	jobs := 0
	for _, f := range finals {
		if f.Type == flowType {
			jobs++
		}
	}
	if jobs == 0 && len(works) == 0 {
		return
	}
	c.sum("%s jobs: %d, %d handler runs recorded, %d of them the succeeded attempt", flowType, jobs, len(works), ran)
	for key, ss := range byKey {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start.Before(ss[j].start) })
		// A sweep over starts and ends: how many ran at once.
		var ends []time.Time
		for _, s := range ss {
			live := ends[:0]
			for _, e := range ends {
				if e.After(s.start) {
					live = append(live, e)
				}
			}
			ends = append(live, s.end)
			if len(ends) > flowLimit {
				c.anomaly("concurrency-exceeded", "%s customer %s: %d jobs ran at once (limit %d), job %s started at %s",
					flowType, key, len(ends), flowLimit, s.job, s.start.Format(time.RFC3339Nano))
				break
			}
		}
	}
}

// rateWindows are the windows over which checkRate counts starts.
var rateWindows = []time.Duration{time.Second, 5 * time.Second, 10 * time.Second}

// checkRate: the flow-limited type's rate limit held across the
// deployment: in no window of w did more attempts of it start than the
// bucket allows (its burst, and flowRate a second), judged on the claims'
// times as the final records give them (every attempt's start, whoever
// claimed it). One more is allowed for a lost claim handed out again as
// the same attempt, which takes no token.
func (c *checker) checkRate(finals map[string]Entry) {
	var starts []time.Time
	for _, f := range finals {
		if f.Type == flowType {
			starts = append(starts, f.Starts...)
		}
	}
	if len(starts) == 0 {
		return
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	worst := map[time.Duration]int{}
	for _, w := range rateWindows {
		allowed := flowBurst + int(flowRate*w.Seconds()) + 1
		j := 0
		for i := range starts {
			for starts[i].Sub(starts[j]) >= w {
				j++
			}
			n := i - j + 1
			worst[w] = max(worst[w], n)
			if n > allowed {
				c.anomaly("rate-exceeded", "%s: %d attempts started within %s up to %s (the rate limit allows %d)",
					flowType, n, w, starts[i].Format(time.RFC3339Nano), allowed)
				break
			}
		}
	}
	c.sum("%s starts: %d; most in 1 s / 5 s / 10 s: %d / %d / %d (limit %d a second, burst %d)", flowType, len(starts),
		worst[time.Second], worst[5*time.Second], worst[10*time.Second], flowRate, flowBurst)
}
