package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Entry is one line of the history. Kind says which fields are set:
//
//   - phase: Phase (start, faults-stopped, settled, ...) and Seed/Note
//   - submit: one HTTP attempt of POST /v1/jobs: Client, Requester, Key,
//     Probe (new, replay, conflict), Gateway, Start, End, Status, Err,
//     Job, Replayed
//   - gave-up: a submission that never got a definitive answer
//   - obs: one observation of a job: Via (poll, sse, sse-end, list), Job,
//     State (empty on a 304), Attempt, Rev, Start, End, Gateway
//   - cancel: one DELETE attempt: Job, Status, Start, End
//   - fault: one nemesis action: Target, Action (kill, restart, stop, cont,
//     skip), Note
//   - exit: a process that exited without being killed: Target, Note
//   - webhook: one delivery at the sink: WebhookID, Job, State, Attempt,
//     Status (what the sink answered), SigOK, Digest (of the data)
//   - mail: one accepted mail: MessageID, Job, State, Note (recipient)
//   - final-job: a record of the JOBGATE_JOBS bucket at the end
//   - final-list: a job as GET /v1/jobs listed it at the end
//   - final-object: an object of the results store: Name, Size, Digest
//   - final-event: a message of JOBGATE_EVENTS: Job, MsgID, State, Attempt,
//     Rev, Seq
//   - fetch: a result downloaded through a gateway: Job, Status, Digest
//
// Batches (POST /v1/batches) add kinds and fields; an entry of an older
// kind only gains fields, so older histories still read the same:
//
//   - batch-submit: one HTTP attempt of POST /v1/batches: the fields of
//     submit, plus Size (items in the request), Notify (batch or each, as
//     asked), and from a 2xx Batch, Created and Items (its jobs in item
//     order, with the states the answer gave)
//   - batch-gave-up: a batch submission that never got a definitive answer
//   - webhook gains Type (the payload's type); a batch.completed delivery
//     names its batch in Batch (Job empty), with Size (its total), Counts
//     and Items of its data
//   - mail gains Batch and Items for a batch's one mail (Message-ID
//     <batch>.completed@jobgate; Job empty, State completed), parsed from
//     its body
//   - final-job gains Batch and Notify (batch or each) for a batch's item
//   - final-batch: GET /v1/batches/{id} at the end: Batch, Requester,
//     Status, Notify, BatchDone, Counts, Items
//
// Scheduled jobs and the flow-limited type (flowType) add:
//
//   - final-job gains Type, RunAt (a scheduled job's), Starts (when each
//     attempt started, as the record says) and FlowKey (a flowType job's
//     customer)
//   - work: one attempt of a flowType job as its handler (the harness's
//     worker) ran it: Job, Attempt, FlowKey, Start, End
type Entry struct {
	T    time.Time `json:"t"`
	Kind string    `json:"kind"`

	Phase string `json:"phase,omitempty"`
	Seed  uint64 `json:"seed,omitempty"`
	Note  string `json:"note,omitempty"`

	Client    int       `json:"client,omitempty"`
	Requester string    `json:"requester,omitempty"`
	Key       string    `json:"key,omitempty"`
	Probe     string    `json:"probe,omitempty"`
	Gateway   string    `json:"gateway,omitempty"`
	Start     time.Time `json:"start,omitzero"`
	End       time.Time `json:"end,omitzero"`
	Status    int       `json:"status,omitempty"`
	Err       string    `json:"err,omitempty"`
	Job       string    `json:"job,omitempty"`
	Replayed  bool      `json:"replayed,omitempty"`

	Via     string `json:"via,omitempty"`
	State   string `json:"state,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Rev     uint64 `json:"rev,omitempty"`
	Done    int    `json:"done,omitempty"` // progress.done

	Target string `json:"target,omitempty"`
	Action string `json:"action,omitempty"`

	WebhookID string `json:"webhook_id,omitempty"`
	SigOK     bool   `json:"sig_ok,omitempty"`
	Digest    string `json:"digest,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	MsgID     string `json:"msg_id,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`

	Name     string    `json:"name,omitempty"`
	Size     int64     `json:"size,omitempty"`
	Object   string    `json:"object,omitempty"`
	KeyHash  string    `json:"key_hash,omitempty"`
	Error    string    `json:"error,omitempty"`
	Finished time.Time `json:"finished,omitzero"`

	Type      string         `json:"type,omitempty"`
	Batch     string         `json:"batch,omitempty"`
	Notify    string         `json:"notify,omitempty"`
	Created   time.Time      `json:"created,omitzero"`
	Items     []Item         `json:"items,omitempty"`
	Counts    map[string]int `json:"counts,omitempty"`
	BatchDone bool           `json:"batch_done,omitempty"`

	RunAt   time.Time   `json:"run_at,omitzero"`
	Starts  []time.Time `json:"starts,omitempty"`
	FlowKey string      `json:"flow_key,omitempty"`
}

// Item is one job of a batch, in item order, with its state where the
// recorded answer, notice or read gave one.
type Item struct {
	ID    string `json:"id"`
	State string `json:"state,omitempty"`
}

// itemIDs returns the job ids of items, in order.
func itemIDs(items []Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// History appends entries to a JSON-lines file, safe for concurrent use.
type History struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

// CreateHistory creates (truncates) the history file at path.
func CreateHistory(path string) (*History, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	w := bufio.NewWriterSize(f, 256<<10)
	return &History{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// Add writes e, stamping T if unset.
func (h *History) Add(e Entry) {
	if e.T.IsZero() {
		e.T = time.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = h.enc.Encode(e)
	}
}

// Close flushes and closes the file.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.w.Flush(); err != nil && h.err == nil {
		h.err = err
	}
	if err := h.f.Close(); err != nil && h.err == nil {
		h.err = err
	}
	return h.err
}

// ReadHistory reads every entry of a history file.
func ReadHistory(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("history line %d: %w", n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return out, nil
}
