package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"
)

// The checks of batches (POST /v1/batches; docs/api.md, "Batches"): a key
// is one batch with one list of jobs however often and wherever it is
// retried; every item is one job of the batch that ends like any job;
// and a batch notified as one gets exactly one batch.completed notice,
// telling its items' final states, while its items get none of their own.

// ackedBatch is a batch a client was answered a 2xx for.
type ackedBatch struct {
	id      string
	key     scopedKey
	notify  string // batch or each, as the request asked
	jobs    []string
	created time.Time
}

// checkBatchKeys: every 2xx answer for one batch key names the same batch
// and the same jobs in the same order, as many as the request had; the
// same key with another body is refused with 409 and nothing else is;
// 202 at most once, a replay says so. It returns the acknowledged batches
// by id.
func (c *checker) checkBatchKeys(submits map[scopedKey][]Entry) map[string]*ackedBatch {
	out := map[string]*ackedBatch{}
	batchKeys := map[string][]scopedKey{}
	for k, es := range inKeyOrder(submits) {
		ids := map[string]bool{}
		created := 0
		var first *Entry
		for i := range es {
			e := &es[i]
			definitive := e.Err == "" && e.Status != 429 && e.Status < 500
			switch {
			case e.Probe == "conflict":
				if definitive && e.Status != 409 {
					c.anomaly("batch-key-reuse-not-refused", "%s batch key %s with another body answered %d (batch %s) via %s, want 409", k.requester, k.key, e.Status, e.Batch, e.Gateway)
				}
				continue
			case e.Status/100 == 2 && (e.Batch == "" || len(e.Items) == 0):
				c.anomaly("batch-without-id", "%s batch key %s answered %d without a batch and its jobs: %s", k.requester, k.key, e.Status, e.Err)
				continue
			case !definitive:
				continue
			case e.Status/100 != 2:
				// A 409 included: this is the body the key was first used with.
				c.anomaly("batch-submit-refused", "%s batch key %s (%s) answered %d via %s", k.requester, k.key, e.Probe, e.Status, e.Gateway)
				continue
			}
			ids[e.Batch] = true
			if e.Status == 202 {
				created++
			}
			switch {
			case i == 0 && e.Replayed:
				c.anomaly("batch-replay-header", "%s batch key %s: its very first request answered %d replayed (batch %s)", k.requester, k.key, e.Status, e.Batch)
			case e.Status == 202 && e.Replayed:
				c.anomaly("batch-replay-header", "%s batch key %s: 202 marked replayed", k.requester, k.key)
			case e.Status == 200 && !e.Replayed:
				c.anomaly("batch-replay-header", "%s batch key %s: 200 without Idempotent-Replayed", k.requester, k.key)
			}
			if int64(len(e.Items)) != e.Size {
				c.anomaly("batch-answer-items", "%s batch key %s: the request had %d jobs, the %d answer via %s lists %d", k.requester, k.key, e.Size, e.Status, e.Gateway, len(e.Items))
			}
			if first == nil {
				first = e
				continue
			}
			if e.Batch == first.Batch && (!slices.Equal(itemIDs(e.Items), itemIDs(first.Items)) || !e.Created.Equal(first.Created)) {
				c.anomaly("batch-jobs-differ", "%s batch key %s, batch %s: the %d answer via %s at %s names jobs %v (created %s), the first %v (created %s)",
					k.requester, k.key, e.Batch, e.Status, e.Gateway, e.End.Format(time.RFC3339Nano), itemIDs(e.Items), e.Created.Format(time.RFC3339Nano),
					itemIDs(first.Items), first.Created.Format(time.RFC3339Nano))
			}
		}
		if len(ids) > 1 {
			c.anomaly("batch-key-two-batches", "%s batch key %s got 2xx answers naming %d batches: %v", k.requester, k.key, len(ids), sortedKeys(ids))
		}
		if created > 1 {
			c.anomaly("batch-created-twice", "%s batch key %s answered 202 Accepted %d times", k.requester, k.key, created)
		}
		if first != nil {
			out[first.Batch] = &ackedBatch{id: first.Batch, key: k, notify: orBatch(first.Notify), jobs: itemIDs(first.Items), created: first.Created}
			batchKeys[first.Batch] = append(batchKeys[first.Batch], k)
		}
	}
	for id, ks := range batchKeys {
		if len(ks) > 1 {
			c.anomaly("batch-two-keys", "batch %s was answered for %d keys: %v", id, len(ks), ks)
		}
	}
	return out
}

// ackedJobs returns every acknowledged job, single or a batch's item,
// with its key; a job answered under two keys (two batches, or a batch
// and a single job) is an anomaly.
func (c *checker) ackedJobs(acked map[scopedKey]string, batches map[string]*ackedBatch) map[string]scopedKey {
	out := map[string]scopedKey{}
	for k, id := range acked {
		out[id] = k
	}
	bids := make([]string, 0, len(batches))
	for id := range batches {
		bids = append(bids, id)
	}
	sort.Strings(bids)
	for _, bid := range bids {
		b := batches[bid]
		seen := map[string]bool{}
		for _, id := range b.jobs {
			if seen[id] {
				c.anomaly("job-two-keys", "job %s is listed twice in batch %s (%s key %s)", id, bid, b.key.requester, b.key.key)
			}
			seen[id] = true
			if k, ok := out[id]; ok && k != b.key {
				c.anomaly("job-two-keys", "job %s was answered for %s key %s and as an item of batch %s (%s key %s)", id, k.requester, k.key, bid, b.key.requester, b.key.key)
			}
			out[id] = b.key
		}
	}
	return out
}

// itemCounts counts the final states of a batch's jobs; ok is false when
// one of them is missing from the final state or not terminal (anomalies
// of their own).
func itemCounts(jobs []string, finals map[string]Entry) (counts map[string]int, ok bool) {
	counts = map[string]int{}
	ok = true
	for _, id := range jobs {
		f, found := finals[id]
		if !found || !terminal(f.State) {
			ok = false
			continue
		}
		counts[f.State]++
	}
	return counts, ok
}

// sameItems reports whether items are jobs, in order, in their final
// states.
func sameItems(items []Item, jobs []string, finals map[string]Entry) bool {
	if len(items) != len(jobs) {
		return false
	}
	for i, it := range items {
		if it.ID != jobs[i] || it.State != finals[jobs[i]].State {
			return false
		}
	}
	return true
}

// sameCounts compares the terminal counts of a notice or a read with the
// counted ones (a state counted zero may be left out of either).
func sameCounts(got, want map[string]int) bool {
	for _, s := range []string{"queued", "running", "succeeded", "failed", "canceled"} {
		if got[s] != want[s] {
			return false
		}
	}
	return true
}

// checkBatchItems: every item of an acknowledged batch is a job whose
// record names that batch and its notice choice (whether it exists and
// ends is checkJobs'); read through a gateway at the end, the batch lists
// the same jobs in their final states, counted alike, and is done.
func (c *checker) checkBatchItems(batches map[string]*ackedBatch, finals map[string]Entry, finalBatches map[string]Entry, read bool) {
	for bid, b := range batches {
		for i, id := range b.jobs {
			f, ok := finals[id]
			if ok && (f.Batch != bid || f.Notify != b.notify) {
				c.anomaly("batch-item-mismatch", "job %s, item %d of batch %s (notify %s), is stored as of batch %q notify %q", id, i, bid, b.notify, f.Batch, f.Notify)
			}
		}
		if !read {
			continue
		}
		fb, ok := finalBatches[bid]
		switch {
		case !ok:
			c.anomaly("batch-read-failed", "batch %s (%s key %s) was not read at the end", bid, b.key.requester, b.key.key)
			continue
		case fb.Status == 404:
			c.anomaly("batch-not-found", "batch %s (%s key %s) was acknowledged but GET /v1/batches/%s answers 404", bid, b.key.requester, b.key.key, bid)
			continue
		case fb.Status != 200:
			c.anomaly("batch-read-failed", "GET /v1/batches/%s answered %d at the end", bid, fb.Status)
			continue
		}
		counts, ended := itemCounts(b.jobs, finals)
		if !ended {
			continue // not-terminal or acked-job-lost says why; states may still move
		}
		if !fb.BatchDone || !sameCounts(fb.Counts, counts) || !sameItems(fb.Items, b.jobs, finals) || fb.Notify != b.notify || !fb.Created.Equal(b.created) {
			c.anomaly("batch-final-mismatch", "batch %s read at the end: done %t, notify %s, counts %v, jobs %v, created %s; its jobs' records: counts %v, notify %s, jobs %v, created %s",
				bid, fb.BatchDone, fb.Notify, fb.Counts, fb.Items, fb.Created.Format(time.RFC3339Nano), counts, b.notify, b.jobs, b.created.Format(time.RFC3339Nano))
		}
	}
}

func isBatchNotice(e Entry) bool { return e.Type == batchNoticeType }

// batchNoticeID is the webhook-id of a batch's notice.
func batchNoticeID(id string, created time.Time) string {
	return id + "." + batchCompleted + "." + strconv.FormatInt(created.UnixMilli(), 10)
}

// checkBatchNotices: the items of a batch notified as one get no webhook
// or mail of their own; such a batch gets one batch.completed notice (one
// webhook-id, <batch>.completed.<created_at ms>, however often it is
// delivered), sent after its last item ended, its data counting and
// listing the items' final states, and delivered once every item has
// ended (the harness waits for it, as for a job's terminal change); at
// most one mail, listing the items. A batch notified each gets no batch
// notice (its items are checkNotices' like any job).
func (c *checker) checkBatchNotices(batches map[string]*ackedBatch, finals map[string]Entry, hooks, mails []Entry) {
	notifyOf := map[string]string{} // job → the notice choice of its batch
	for _, b := range batches {
		for _, id := range b.jobs {
			notifyOf[id] = b.notify
		}
	}
	for id, f := range finals {
		if f.Batch != "" {
			notifyOf[id] = f.Notify // what the notifier acts on
		}
	}
	notices := map[string][]Entry{}
	for _, e := range hooks {
		switch {
		case isBatchNotice(e):
			notices[e.Batch] = append(notices[e.Batch], e)
		case notifyOf[e.Job] == "batch":
			c.anomaly("batch-item-notified", "job %s, an item of batch %s notified as one, got webhook %s (%s)", e.Job, finals[e.Job].Batch, e.WebhookID, e.State)
		}
	}
	batchMails := map[string][]Entry{}
	for _, m := range mails {
		switch {
		case m.Batch != "":
			batchMails[m.Batch] = append(batchMails[m.Batch], m)
		case notifyOf[m.Job] == "batch":
			c.anomaly("batch-item-notified", "job %s, an item of batch %s notified as one, got mail %s", m.Job, finals[m.Job].Batch, m.MessageID)
		}
	}
	for bid, es := range notices {
		b, ok := batches[bid]
		if !ok || b.notify != "batch" {
			c.anomaly("batch-notice-unwanted", "batch %s (%s) got %d batch.completed deliveries", bid, ackedAs(b), len(es))
			continue
		}
		ids := map[string]bool{}
		for _, e := range es {
			ids[e.WebhookID] = true
		}
		if len(ids) > 1 {
			c.anomaly("batch-notice-twice", "batch %s was notified under %d webhook ids: %v", bid, len(ids), sortedKeys(ids))
		}
		if want := batchNoticeID(bid, b.created); !b.created.IsZero() && (len(ids) != 1 || !ids[want]) {
			c.anomaly("batch-notice-id", "batch %s was notified as %v, want webhook-id %s", bid, sortedKeys(ids), want)
		}
		counts, ended := itemCounts(b.jobs, finals)
		last := time.Time{}
		for _, id := range b.jobs {
			if f := finals[id]; f.Finished.After(last) {
				last = f.Finished
			}
		}
		bad, early := 0, 0
		var badEx, earlyEx Entry
		for _, e := range es {
			if !ended || e.Size != int64(len(b.jobs)) || !sameCounts(e.Counts, counts) || !sameItems(e.Items, b.jobs, finals) {
				if bad == 0 {
					badEx = e
				}
				bad++
			}
			if !e.T.IsZero() && e.T.Before(last) {
				if early == 0 {
					earlyEx = e
				}
				early++
			}
		}
		if bad > 0 {
			c.anomaly("batch-notice-data", "batch %s: %d of %d deliveries tell total %d, counts %v, jobs %v; its jobs %v ended %v", bid, bad, len(es), badEx.Size, badEx.Counts, badEx.Items, b.jobs, finalStates(b.jobs, finals))
		}
		if early > 0 {
			c.anomaly("batch-notice-early", "batch %s: %d deliveries before its last job ended (%s delivered at %s, the last job ended at %s)", bid, early, earlyEx.WebhookID, earlyEx.T.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
		}
	}
	missingMail := 0
	for bid, b := range batches {
		if b.notify != "batch" {
			continue
		}
		if _, ended := itemCounts(b.jobs, finals); !ended {
			continue // not-terminal or acked-job-lost says why
		}
		accepted := false
		for _, e := range notices[bid] {
			accepted = accepted || e.Status/100 == 2
		}
		if !accepted {
			c.anomaly("batch-notice-missing", "batch %s: all %d jobs ended %v; no batch.completed delivery was accepted (%d tried)", bid, len(b.jobs), finalStates(b.jobs, finals), len(notices[bid]))
		}
		if len(batchMails[bid]) == 0 {
			missingMail++
		}
	}
	if missingMail > 0 {
		c.note("%d batches notified as one got no mail (mail is at most once, as a job's)", missingMail)
	}
	for bid, ms := range batchMails {
		b, ok := batches[bid]
		if !ok || b.notify != "batch" {
			c.anomaly("batch-notice-unwanted", "batch %s (%s) got %d batch mails", bid, ackedAs(b), len(ms))
			continue
		}
		if len(ms) > 1 {
			c.anomaly("batch-mail-twice", "batch %s: mail %s sent %d times", bid, ms[0].MessageID, len(ms))
		}
		for _, m := range ms {
			if !sameItems(m.Items, b.jobs, finals) {
				c.anomaly("batch-mail-data", "batch %s: its mail lists %v; its jobs %v ended %v", bid, m.Items, b.jobs, finalStates(b.jobs, finals))
			}
		}
	}
}

func ackedAs(b *ackedBatch) string {
	if b == nil {
		return "acknowledged to no client"
	}
	return "notify " + b.notify
}

func finalStates(jobs []string, finals map[string]Entry) []string {
	out := make([]string, len(jobs))
	for i, id := range jobs {
		if f, ok := finals[id]; ok {
			out[i] = f.State
		} else {
			out[i] = "missing"
		}
	}
	return out
}

func (c *checker) summarizeBatches(submits map[scopedKey][]Entry, batches map[string]*ackedBatch, hooks, mails []Entry) {
	if len(submits) == 0 {
		return
	}
	attempts, items := 0, 0
	notify, status, probes := map[string]int{}, map[string]int{}, map[string]int{}
	for _, es := range submits {
		for _, e := range es {
			attempts++
			if e.Probe != "new" && (e.Status/100 == 2 || e.Status == 409) {
				probes[e.Probe+" answered"]++
			}
			if e.Err != "" && e.Status == 0 {
				status["no answer"]++
			} else {
				status[fmt.Sprint(e.Status)]++
			}
		}
	}
	for _, b := range batches {
		notify[b.notify]++
		items += len(b.jobs)
	}
	ids := map[string]bool{}
	deliveries := 0
	for _, h := range hooks {
		if isBatchNotice(h) {
			ids[h.WebhookID] = true
			deliveries++
		}
	}
	nMails := 0
	for _, m := range mails {
		if m.Batch != "" {
			nMails++
		}
	}
	c.sum("batches: %d keys, %d HTTP requests %s %s; %d acknowledged with %d jobs, notify %s; batch.completed deliveries %d (%d ids), batch mails %d",
		len(submits), attempts, fmtCounts(status), fmtCounts(probes), len(batches), items, fmtCounts(notify), deliveries, len(ids), nMails)
}

// String is an item in messages: id/state.
func (it Item) String() string { return fmt.Sprintf("%s/%s", it.ID, it.State) }
