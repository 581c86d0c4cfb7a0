package job

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jobgate/jobgate/internal/canon"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/pkg/api"
)

// Batch bounds (docs/api.md, "Batches").
const (
	// MaxBatchItems is the most jobs one batch holds.
	MaxBatchItems = 1000
	// MaxBatchBody bounds a POST /v1/batches body: 1 MiB.
	MaxBatchBody = 1 << 20
	// MaxBatchRecord bounds the stored batch record (the items' canonical
	// requests with their defaults applied, their ids and fingerprints): it
	// is one JetStream message, and every server of a deployment takes 8 MB
	// (max_payload), so 4 MiB leaves room. A body within MaxBatchBody whose
	// defaults grow it past this answers 413, nothing admitted.
	MaxBatchRecord = 4 << 20
	// maxBatchFieldErrors bounds the field errors one 422 lists.
	maxBatchFieldErrors = api.MaxFieldErrors
)

// BatchItem is one job of a batch as admitted: the canonical request and
// the limits its type had, so that whoever creates the item's record (the
// gateway after its commit, or the relay after a crash) writes the same
// one.
type BatchItem struct {
	JobID          string          `json:"job_id"`
	Type           string          `json:"type"`
	Params         json.RawMessage `json:"params"`
	Fingerprint    string          `json:"fingerprint"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds,omitempty"`
	// The item's flow fields, a delay resolved against the batch's
	// CreatedAt (ItemRecord starts an item with a run_at ahead scheduled).
	RunAt    *time.Time `json:"run_at,omitempty"`
	Priority int        `json:"priority,omitempty"`
	StartBy  *time.Time `json:"start_by,omitempty"`
}

// BatchRecord is the one stored document of a batch: the idempotency
// record of its key (scope, fingerprint) and every item, written
// create-only in one write. Its items become job records create-only too,
// each under an id derived from the batch and the item's index, so every
// run of the admission (the gateway's, any number of relay runs after
// crashes) creates each job once. AdmittedAt is set, by compare-and-set,
// once every item's record was seen to exist.
type BatchRecord struct {
	ID          string     `json:"id"`
	Tenant      string     `json:"tenant"`
	Requester   string     `json:"requester"`
	KeyHash     string     `json:"key_hash"`
	Fingerprint string     `json:"fingerprint"`
	CreatedAt   time.Time  `json:"created_at"`
	AdmittedAt  *time.Time `json:"admitted_at,omitempty"`
	// Notify is the batch's notice choice: "" (one notice when every item
	// has ended) or NotifyEach (each item notified as a job).
	Notify string      `json:"notify,omitempty"`
	Items  []BatchItem `json:"items"`
	// Trace and TraceState are the W3C trace context of the batch's
	// admission span (traceparent, tracestate), which every item's record
	// keeps (ItemRecord): the batch's jobs are traced as its admission's
	// children, whoever creates their records.
	Trace      string `json:"trace,omitempty"`
	TraceState string `json:"trace_state,omitempty"`

	// Revision is the store's revision (not stored).
	Revision uint64 `json:"-"`
}

// Key is the batch record's store key (tenant.requester.id).
func (b *BatchRecord) Key() string { return StoreKey(b.Tenant, b.Requester, b.ID) }

// Marshal encodes the record for storage.
func (b *BatchRecord) Marshal() ([]byte, error) {
	data, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encode batch %s: %w", b.ID, err)
	}
	return data, nil
}

// UnmarshalBatch decodes a stored batch record and attaches its revision.
func UnmarshalBatch(data []byte, revision uint64) (*BatchRecord, error) {
	var b BatchRecord
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("decode batch: %w", err)
	}
	b.Revision = revision
	return &b, nil
}

// ItemRecord is the job record of item i as admission creates it: queued
// (scheduled with a run_at ahead), created when the batch was, in the batch's scope, tagged with the batch's
// key hash. It is a pure function of the batch record.
func (b *BatchRecord) ItemRecord(i int) *Record {
	it := b.Items[i]
	r := &Record{
		ID: it.JobID, Tenant: b.Tenant, Requester: b.Requester, KeyHash: b.KeyHash,
		Fingerprint: it.Fingerprint, Type: it.Type, Params: it.Params,
		State: StateQueued, CreatedAt: b.CreatedAt, UpdatedAt: b.CreatedAt,
		MaxAttempts: it.MaxAttempts, TimeoutSeconds: it.TimeoutSeconds,
		Batch: b.ID, BatchNotify: b.Notify, Trace: b.Trace, TraceState: b.TraceState,
	}
	Flow{RunAt: it.RunAt, Priority: it.Priority, StartBy: it.StartBy}.Apply(r)
	return r
}

// The notice choices of a batch (POST /v1/batches "notify").
const (
	// NotifyBatch: one notice (webhook batch.completed, one mail) once
	// every item has ended, none per item. The default; stored as "".
	NotifyBatch = "batch"
	// NotifyEach: every item notified as any job is, no batch notice.
	NotifyEach = "each"
)

// BatchRequest is a validated batch body: its items' requests and the
// batch's fingerprint over them.
type BatchRequest struct {
	Items       []*Request
	Fingerprint string // hex SHA-256 of the canonical items, in order (and the notice choice when not the default)
	Notify      string // "" (NotifyBatch) or NotifyEach
}

// DecodeBatch parses and validates a POST /v1/batches body as a whole: one
// JSON object (canon.DecodeStrict) with the member "jobs", an array
// of 1 to MaxBatchItems submissions, and optionally "notify" ("batch", the
// default, or "each"), each validated as DecodeSubmission
// validates one body. Any invalid item makes the whole batch invalid: a
// *ValidationError whose fields point into the body ("/jobs/3/params/pages"),
// at most maxBatchFieldErrors of them.
func DecodeBatch(body []byte, types schema.Types) (*BatchRequest, error) {
	v, err := canon.DecodeStrict(body)
	if err != nil {
		return nil, err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, Userf(ErrMalformed, "body must be a JSON object")
	}
	var fe []FieldError
	notify := ""
	if raw, ok := top["notify"]; ok {
		switch raw {
		case NotifyBatch:
		case NotifyEach:
			notify = NotifyEach
		default:
			fe = append(fe, FieldError{Field: "/notify", Rule: "enum", Message: `must be "batch" or "each"`})
		}
	}
	for k := range top {
		if k != "jobs" && k != "notify" {
			fe = append(fe, FieldError{Field: "/" + canon.EscapePointerToken(k), Rule: "additionalProperties", Message: "is not allowed"})
		}
	}
	raw, present := top["jobs"]
	items, isArray := raw.([]any)
	switch {
	case !present:
		fe = append(fe, FieldError{Field: "/jobs", Rule: "required", Message: "is required"})
	case !isArray:
		fe = append(fe, FieldError{Field: "/jobs", Rule: "type", Message: "must be an array"})
	case len(items) == 0:
		fe = append(fe, FieldError{Field: "/jobs", Rule: "minItems", Message: "must hold at least 1 job"})
	case len(items) > MaxBatchItems:
		fe = append(fe, FieldError{Field: "/jobs", Rule: "maxItems", Message: fmt.Sprintf("must hold at most %d jobs", MaxBatchItems)})
	}
	if len(fe) > 0 {
		return nil, validation(fe)
	}
	size := len(body) / len(items)
	out := &BatchRequest{Items: make([]*Request, len(items))}
	truncated := false
	for i, item := range items {
		prefix := "/jobs/" + strconv.Itoa(i)
		obj, ok := item.(map[string]any)
		if !ok {
			fe = append(fe, FieldError{Field: prefix, Rule: "type", Message: "must be an object"})
			continue
		}
		req, err := requestOf(obj, size, types)
		if err != nil {
			ve, ok := err.(*ValidationError)
			if !ok {
				return nil, fmt.Errorf("batch item %d: %w", i, err)
			}
			for _, e := range ve.Errors {
				e.Field = prefix + e.Field
				fe = append(fe, e)
			}
			truncated = truncated || ve.Truncated
			if len(fe) >= maxBatchFieldErrors {
				// An item's own list stops at the bound too, so no
				// item costs more errors than one 422 lists.
				truncated = truncated || len(fe) > maxBatchFieldErrors || i < len(items)-1
				break
			}
			continue
		}
		out.Items[i] = req
	}
	if len(fe) > 0 {
		if len(fe) > maxBatchFieldErrors {
			fe = fe[:maxBatchFieldErrors]
		}
		return nil, &ValidationError{Errors: fe, Truncated: truncated} // in item order
	}
	h := sha256.New()
	h.Write([]byte{'['})
	for i, r := range out.Items {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(r.Canonical)
	}
	h.Write([]byte{']'})
	if notify != "" {
		// Another choice under the same key is another request (409); the
		// default leaves the fingerprint of the items alone.
		h.Write([]byte("\x00notify=" + notify))
	}
	out.Fingerprint = hex.EncodeToString(h.Sum(nil))
	out.Notify = notify
	return out, nil
}

var batchIDPattern = regexp.MustCompile(`^bat_[a-z2-7]{26}$`)

// ValidBatchID reports whether s has the shape of a batch id.
func ValidBatchID(s string) bool { return batchIDPattern.MatchString(s) }

// BatchPath is the status path of a batch.
func BatchPath(id string) string { return "/v1/batches/" + id }

// The domains of the batch derivations: a job id's HMAC message starts with
// a tenant id, a key hash's with keyHashDomain; tenant ids never hold these
// bytes, so no two derivations share an input.
const (
	batchIDDomain = 0x02
	batchItemDom  = 0x03
)

// DeriveBatch returns the batch id of an idempotency key of POST
// /v1/batches in its scope ("bat_" + 26 base32 characters of an HMAC,
// like a job id, in a domain of its own: a key used for a job and for a
// batch names two unrelated things).
func (d *IDDeriver) DeriveBatch(tenant, requester, key string) string {
	s := d.pool.Get().(*hmacState)
	var enc [52]byte
	idEncoding.Encode(enc[:], s.sumOf([]byte{batchIDDomain}, tenant, requester, key))
	d.pool.Put(s)
	return "bat_" + string(enc[:26])
}

// DeriveItem returns the job id of item index of a batch: an HMAC of the
// batch's scope, its id and the index, so the same batch always names the
// same jobs, whoever admits them and however often.
func (d *IDDeriver) DeriveItem(tenant, requester, batchID string, index int) string {
	s := d.pool.Get().(*hmacState)
	var enc [52]byte
	idEncoding.Encode(enc[:], s.sumOf([]byte{batchItemDom}, tenant, requester, batchID+"\x00"+strconv.Itoa(index)))
	d.pool.Put(s)
	return "job_" + string(enc[:26])
}
