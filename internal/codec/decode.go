package codec

import (
	"encoding/json"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// fastUnmarshal fills r from a stored record in the shape AppendRecord writes
// (known keys once each, plain ASCII strings without escapes, integers,
// RFC 3339 times via time.Time's own UnmarshalJSON). It reports false for
// anything else, and the caller then uses encoding/json: this path accepts
// only what encoding/json accepts, with the same result (decode_test.go).
func fastUnmarshal(r *job.Record, data []byte) bool {
	p := fastParser{b: data}
	if !p.lit('{') {
		return false
	}
	if p.lit('}') {
		return p.end()
	}
	var seen uint64
	for {
		key, ok := p.key()
		if !ok || !p.lit(':') {
			return false
		}
		field, ok := recordKeys[string(key)] // no allocation for a map lookup
		if !ok || seen&(1<<field) != 0 {
			return false
		}
		seen |= 1 << field
		p.ws()
		switch field {
		case fID:
			ok = p.into(&r.ID)
		case fTenant:
			ok = p.into(&r.Tenant)
		case fRequester:
			ok = p.into(&r.Requester)
		case fKeyHash:
			ok = p.into(&r.KeyHash)
		case fFingerprint:
			ok = p.into(&r.Fingerprint)
		case fType:
			ok = p.into(&r.Type)
		case fParams:
			r.Params, ok = p.raw()
		case fState:
			var s string
			ok = p.into(&s)
			r.State = job.State(s)
		case fAttempt:
			r.Attempt, ok = p.int()
		case fMaxAttempts:
			r.MaxAttempts, ok = p.int()
		case fTimeoutSeconds:
			r.TimeoutSeconds, ok = p.int()
		case fCreatedAt:
			ok = p.time(&r.CreatedAt)
		case fUpdatedAt:
			ok = p.time(&r.UpdatedAt)
		case fStartedAt:
			r.StartedAt, ok = p.timePtr()
		case fFinishedAt:
			r.FinishedAt, ok = p.timePtr()
		case fRetryAt:
			r.RetryAt, ok = p.timePtr()
		case fHeartbeatAt:
			r.HeartbeatAt, ok = p.timePtr()
		case fWorker:
			ok = p.into(&r.Worker)
		case fClaimID:
			ok = p.into(&r.ClaimID)
		case fPlace:
			ok = p.into(&r.Place)
		case fGivenBack:
			r.GivenBack, ok = p.int()
		case fProgress:
			r.Progress, ok = p.progress()
		case fError:
			r.Error, ok = p.failure()
		case fOutput:
			r.Output, ok = p.output()
		case fAttempts:
			r.Attempts, ok = p.attempts()
		case fRetryOf:
			ok = p.into(&r.RetryOf)
		case fRetriedAs:
			ok = p.into(&r.RetriedAs)
		case fTrace:
			ok = p.into(&r.Trace)
		case fTraceState:
			ok = p.into(&r.TraceState)
		case fBatch:
			ok = p.into(&r.Batch)
		case fBatchNotify:
			ok = p.into(&r.BatchNotify)
		case fRunAt:
			r.RunAt, ok = p.timePtr()
		case fPriority:
			r.Priority, ok = p.int()
		case fStartBy:
			r.StartBy, ok = p.timePtr()
		}
		if !ok {
			return false
		}
		if p.lit(',') {
			continue
		}
		return p.lit('}') && p.end()
	}
}

// The fields of a stored record, by their JSON names.
const (
	fID = iota
	fTenant
	fRequester
	fKeyHash
	fFingerprint
	fType
	fParams
	fState
	fAttempt
	fCreatedAt
	fUpdatedAt
	fStartedAt
	fFinishedAt
	fRetryAt
	fHeartbeatAt
	fWorker
	fClaimID
	fProgress
	fError
	fOutput
	fMaxAttempts
	fTimeoutSeconds
	fGivenBack
	fAttempts
	fRetryOf
	fRetriedAs
	fBatch
	fBatchNotify
	fTrace
	fTraceState
	fRunAt
	fPriority
	fStartBy
	fPlace
)

var recordKeys = map[string]int{
	"id": fID, "tenant": fTenant, "requester": fRequester, "key_hash": fKeyHash, "fingerprint": fFingerprint,
	"type": fType, "params": fParams, "state": fState, "attempt": fAttempt, "created_at": fCreatedAt,
	"updated_at": fUpdatedAt, "started_at": fStartedAt, "finished_at": fFinishedAt, "retry_at": fRetryAt,
	"heartbeat_at": fHeartbeatAt, "worker": fWorker, "claim_id": fClaimID, "place": fPlace, "progress": fProgress, "error": fError, "output": fOutput,
	"max_attempts": fMaxAttempts, "timeout_seconds": fTimeoutSeconds, "given_back": fGivenBack,
	"attempts": fAttempts, "retry_of": fRetryOf, "retried_as": fRetriedAs,
	"batch": fBatch, "batch_notify": fBatchNotify,
	"trace": fTrace, "trace_state": fTraceState,
	"run_at": fRunAt, "priority": fPriority, "start_by": fStartBy,
}

// key reads a plain string like str, without copying it.
func (p *fastParser) key() ([]byte, bool) { return p.plain() }

// end: nothing but white space follows.
func (p *fastParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

func (p *fastParser) into(dst *string) bool {
	s, ok := p.str()
	*dst = s
	return ok
}

// int reads an integer as encoding/json does into an int: digits only.
func (p *fastParser) int() (int, bool) {
	start := p.i
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	if p.i >= len(p.b) || p.b[p.i] < '0' || p.b[p.i] > '9' || (p.b[p.i] == '0' && p.i+1 < len(p.b) && p.b[p.i+1] >= '0' && p.b[p.i+1] <= '9') {
		return 0, false
	}
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		if p.i-start > 15 { // keep far from overflow; encoding/json takes it
			return 0, false
		}
		n = n*10 + int(p.b[p.i]-'0')
		p.i++
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

func (p *fastParser) bool() (bool, bool) {
	switch {
	case len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "true":
		p.i += 4
		return true, true
	case len(p.b)-p.i >= 5 && string(p.b[p.i:p.i+5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// time reads a quoted time with time.Time.UnmarshalJSON, exactly as
// encoding/json does.
func (p *fastParser) time(dst *time.Time) bool {
	start := p.i
	if _, ok := p.str(); !ok {
		return false
	}
	return dst.UnmarshalJSON(p.b[start:p.i]) == nil
}

func (p *fastParser) timePtr() (*time.Time, bool) {
	t := new(time.Time)
	return t, p.time(t)
}

// raw reads one JSON value of plain strings, numbers, literals, objects and
// arrays, and returns a copy of its bytes, as encoding/json fills a
// json.RawMessage.
func (p *fastParser) raw() (json.RawMessage, bool) {
	start := p.i
	if !p.skip(0) {
		return nil, false
	}
	return append(json.RawMessage(nil), p.b[start:p.i]...), true
}

func (p *fastParser) skip(depth int) bool {
	if depth > 32 || p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '{':
		p.i++
		if p.lit('}') {
			return true
		}
		for {
			if _, ok := p.str(); !ok || !p.lit(':') {
				return false
			}
			p.ws()
			if !p.skip(depth + 1) {
				return false
			}
			if p.lit(',') {
				continue
			}
			return p.lit('}')
		}
	case c == '[':
		p.i++
		if p.lit(']') {
			return true
		}
		for {
			p.ws()
			if !p.skip(depth + 1) {
				return false
			}
			if p.lit(',') {
				continue
			}
			return p.lit(']')
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't' || c == 'f':
		_, ok := p.bool()
		return ok
	case c == 'n':
		if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
			p.i += 4
			return true
		}
	}
	return false
}

// object reads a flat object, calling field for each key (once each).
func (p *fastParser) object(field func(key []byte) bool) bool {
	if !p.lit('{') {
		return false
	}
	if p.lit('}') {
		return true
	}
	var seen [6][]byte
	n := 0
	for {
		key, ok := p.key()
		if !ok || !p.lit(':') || n == len(seen) {
			return false
		}
		for _, k := range seen[:n] {
			if string(k) == string(key) {
				return false
			}
		}
		seen[n] = key
		n++
		p.ws()
		if !field(key) {
			return false
		}
		if p.lit(',') {
			continue
		}
		return p.lit('}')
	}
}

func (p *fastParser) progress() (*job.Progress, bool) {
	v := &job.Progress{}
	ok := p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "done":
			v.Done, ok = p.int()
		case "total":
			v.Total, ok = p.int()
		case "unit":
			ok = p.into(&v.Unit)
		}
		return ok
	})
	return v, ok
}

func (p *fastParser) failure() (*job.Failure, bool) {
	v := &job.Failure{}
	ok := p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "category":
			ok = p.into(&v.Category)
		case "message":
			ok = p.into(&v.Message)
		case "retryable":
			v.Retryable, ok = p.bool()
		}
		return ok
	})
	return v, ok
}

func (p *fastParser) output() (*job.Output, bool) {
	v := &job.Output{}
	ok := p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "object":
			ok = p.into(&v.Object)
		case "content_type":
			ok = p.into(&v.ContentType)
		case "size":
			var n int
			n, ok = p.int()
			v.Size = int64(n)
		case "sha256":
			ok = p.into(&v.SHA256)
		}
		return ok
	})
	return v, ok
}

// attempts reads the attempt history: a non-empty array of attempt
// objects (AppendRecord never writes an empty one).
func (p *fastParser) attempts() ([]job.Attempt, bool) {
	if !p.lit('[') {
		return nil, false
	}
	var out []job.Attempt
	for {
		p.ws()
		var a job.Attempt
		ok := p.object(func(k []byte) bool {
			var ok bool
			switch string(k) {
			case "attempt":
				a.Attempt, ok = p.int()
			case "worker":
				ok = p.into(&a.Worker)
			case "started_at":
				ok = p.time(&a.StartedAt)
			case "ended_at":
				a.EndedAt, ok = p.timePtr()
			case "outcome":
				ok = p.into(&a.Outcome)
			case "error":
				a.Error, ok = p.failure()
			}
			return ok
		})
		if !ok {
			return nil, false
		}
		out = append(out, a)
		if p.lit(',') {
			continue
		}
		return out, p.lit(']')
	}
}
