package codec

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jobgate/jobgate/internal/canon"
	"github.com/jobgate/jobgate/internal/job"
)

// Hand-built encoders for the two documents on the admission and read hot
// paths: the stored Record and the public Resource. They write exactly the
// bytes encoding/json writes for these structs (field order, omitempty,
// RFC 3339 times, HTML-safe string escaping, compacted raw params) without
// reflection, which the benchmarks showed to be a large share of a request's
// CPU and allocations. encode_test.go holds them to encoding/json's output.

// AppendRecord appends the stored form of r to b.
func AppendRecord(b []byte, r *job.Record) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"tenant":`...)
	b = appendString(b, r.Tenant)
	b = append(b, `,"requester":`...)
	b = appendString(b, r.Requester)
	b = append(b, `,"key_hash":`...)
	b = appendString(b, r.KeyHash)
	b = append(b, `,"fingerprint":`...)
	b = appendString(b, r.Fingerprint)
	b = append(b, `,"type":`...)
	b = appendString(b, r.Type)
	b = append(b, `,"params":`...)
	b = appendRaw(b, r.Params)
	b = append(b, `,"state":`...)
	b = appendString(b, string(r.State))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	if r.MaxAttempts != 0 {
		b = append(b, `,"max_attempts":`...)
		b = strconv.AppendInt(b, int64(r.MaxAttempts), 10)
	}
	if r.TimeoutSeconds != 0 {
		b = append(b, `,"timeout_seconds":`...)
		b = strconv.AppendInt(b, int64(r.TimeoutSeconds), 10)
	}
	b = append(b, `,"created_at":`...)
	b = appendTime(b, r.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, r.UpdatedAt)
	b = appendOptTime(b, `,"started_at":`, r.StartedAt)
	b = appendOptTime(b, `,"finished_at":`, r.FinishedAt)
	b = appendOptTime(b, `,"retry_at":`, r.RetryAt)
	b = appendOptTime(b, `,"heartbeat_at":`, r.HeartbeatAt)
	if r.Worker != "" {
		b = append(b, `,"worker":`...)
		b = appendString(b, r.Worker)
	}
	if r.ClaimID != "" {
		b = append(b, `,"claim_id":`...)
		b = appendString(b, r.ClaimID)
	}
	if r.Place != "" {
		b = append(b, `,"place":`...)
		b = appendString(b, r.Place)
	}
	if r.GivenBack != 0 {
		b = append(b, `,"given_back":`...)
		b = strconv.AppendInt(b, int64(r.GivenBack), 10)
	}
	b = appendProgress(b, r.Progress)
	b = appendFailure(b, r.Error)
	if o := r.Output; o != nil {
		b = append(b, `,"output":{"object":`...)
		b = appendString(b, o.Object)
		b = append(b, `,"content_type":`...)
		b = appendString(b, o.ContentType)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, o.Size, 10)
		b = append(b, `,"sha256":`...)
		b = appendString(b, o.SHA256)
		b = append(b, '}')
	}
	b = appendAttempts(b, r.Attempts)
	if r.RetryOf != "" {
		b = append(b, `,"retry_of":`...)
		b = appendString(b, r.RetryOf)
	}
	if r.RetriedAs != "" {
		b = append(b, `,"retried_as":`...)
		b = appendString(b, r.RetriedAs)
	}
	if r.Trace != "" {
		b = append(b, `,"trace":`...)
		b = appendString(b, r.Trace)
	}
	if r.TraceState != "" {
		b = append(b, `,"trace_state":`...)
		b = appendString(b, r.TraceState)
	}
	if r.Batch != "" {
		b = append(b, `,"batch":`...)
		b = appendString(b, r.Batch)
	}
	if r.BatchNotify != "" {
		b = append(b, `,"batch_notify":`...)
		b = appendString(b, r.BatchNotify)
	}
	b = appendOptTime(b, `,"run_at":`, r.RunAt)
	if r.Priority != 0 {
		b = append(b, `,"priority":`...)
		b = strconv.AppendInt(b, int64(r.Priority), 10)
	}
	b = appendOptTime(b, `,"start_by":`, r.StartBy)
	return append(b, '}')
}

func appendAttempts(b []byte, as []job.Attempt) []byte {
	if len(as) == 0 {
		return b
	}
	b = append(b, `,"attempts":[`...)
	for i := range as {
		a := &as[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"attempt":`...)
		b = strconv.AppendInt(b, int64(a.Attempt), 10)
		b = append(b, `,"worker":`...)
		b = appendString(b, a.Worker)
		b = append(b, `,"started_at":`...)
		b = appendTime(b, a.StartedAt)
		b = appendOptTime(b, `,"ended_at":`, a.EndedAt)
		if a.Outcome != "" {
			b = append(b, `,"outcome":`...)
			b = appendString(b, a.Outcome)
		}
		b = appendFailure(b, a.Error)
		b = append(b, '}')
	}
	return append(b, ']')
}

// AppendResource appends the public form of res to b (the hot path of every status read; encoding/json gives the same bytes).
func AppendResource(b []byte, res *job.Resource) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, res.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, res.Type)
	b = append(b, `,"params":`...)
	b = appendRaw(b, res.Params)
	b = append(b, `,"state":`...)
	b = appendString(b, string(res.State))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(res.Attempt), 10)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, res.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, res.UpdatedAt)
	b = appendOptTime(b, `,"started_at":`, res.StartedAt)
	b = appendOptTime(b, `,"finished_at":`, res.FinishedAt)
	b = appendOptTime(b, `,"retry_at":`, res.RetryAt)
	b = appendOptTime(b, `,"run_at":`, res.RunAt)
	b = appendOptTime(b, `,"start_by":`, res.StartBy)
	b = appendPriority(b, res.Priority)
	b = appendProgress(b, res.Progress)
	b = appendFailure(b, res.Error)
	if l := res.Result; l != nil {
		b = append(b, `,"result":{`...)
		if l.Href != "" {
			b = append(b, `"href":`...)
			b = appendString(b, l.Href)
			b = append(b, ',')
		}
		if l.ExpiresAt != nil {
			b = append(b, `"expires_at":`...)
			b = appendTime(b, *l.ExpiresAt)
			b = append(b, ',')
		}
		b = append(b, `"content_type":`...)
		b = appendString(b, l.ContentType)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, l.Size, 10)
		b = append(b, `,"sha256":`...)
		b = appendString(b, l.SHA256)
		b = append(b, '}')
	}
	b = append(b, `,"links":{"self":`...)
	b = appendString(b, res.Links.Self)
	b = append(b, `,"events":`...)
	b = appendString(b, res.Links.Events)
	b = append(b, `,"result":`...)
	b = appendString(b, res.Links.Result)
	return append(b, `}}`...)
}

// AppendRecordResource appends r.Resource(href, expires) in its JSON form to
// b without building the Resource (the response body of admissions and
// status reads).
func AppendRecordResource(b []byte, r *job.Record, href string, expires time.Time) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, r.Type)
	b = append(b, `,"params":`...)
	b = appendRaw(b, r.Params)
	b = append(b, `,"state":`...)
	b = appendString(b, string(r.State))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, r.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, r.UpdatedAt)
	b = appendOptTime(b, `,"started_at":`, r.StartedAt)
	b = appendOptTime(b, `,"finished_at":`, r.FinishedAt)
	if r.State == job.StateRunning {
		b = appendOptTime(b, `,"retry_at":`, r.RetryAt)
	}
	b = appendOptTime(b, `,"run_at":`, r.RunAt)
	b = appendOptTime(b, `,"start_by":`, r.StartBy)
	b = appendPriority(b, r.ShownPriority())
	b = appendProgress(b, r.Progress)
	if r.State == job.StateFailed || r.DeadlineMissed() {
		b = appendFailure(b, r.Error)
	}
	if o := r.Output; r.State == job.StateSucceeded && o != nil {
		b = append(b, `,"result":{`...)
		if href != "" {
			b = append(b, `"href":`...)
			b = appendString(b, href)
			b = append(b, `,"expires_at":`...)
			b = appendTime(b, expires.UTC())
			b = append(b, ',')
		}
		b = append(b, `"content_type":`...)
		b = appendString(b, o.ContentType)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, o.Size, 10)
		b = append(b, `,"sha256":`...)
		b = appendString(b, o.SHA256)
		b = append(b, '}')
	}
	// Links are JobPath(id), + "/events", + "/result".
	b = append(b, `,"links":{"self":"/v1/jobs/`...)
	b = appendStringBody(b, r.ID)
	b = append(b, `","events":"/v1/jobs/`...)
	b = appendStringBody(b, r.ID)
	b = append(b, `/events","result":"/v1/jobs/`...)
	b = appendStringBody(b, r.ID)
	return append(b, `/result"}}`...)
}

func appendPriority(b []byte, p int) []byte {
	if p == 0 {
		return b
	}
	b = append(b, `,"priority":`...)
	return strconv.AppendInt(b, int64(p), 10)
}

func appendProgress(b []byte, p *job.Progress) []byte {
	if p == nil {
		return b
	}
	b = append(b, `,"progress":{"done":`...)
	b = strconv.AppendInt(b, int64(p.Done), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(p.Total), 10)
	b = append(b, `,"unit":`...)
	b = appendString(b, p.Unit)
	return append(b, '}')
}

func appendFailure(b []byte, f *job.Failure) []byte {
	if f == nil {
		return b
	}
	b = append(b, `,"error":{"category":`...)
	b = appendString(b, f.Category)
	b = append(b, `,"message":`...)
	b = appendString(b, f.Message)
	b = append(b, `,"retryable":`...)
	b = strconv.AppendBool(b, f.Retryable)
	return append(b, '}')
}

func appendOptTime(b []byte, name string, t *time.Time) []byte {
	if t == nil {
		return b
	}
	return appendTime(append(b, name...), *t)
}

// appendTime writes t as time.Time.MarshalJSON does (RFC 3339 with
// nanoseconds, trailing zeros trimmed).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendRaw writes raw JSON as encoding/json writes a json.RawMessage:
// compacted and HTML-escaped, "null" when empty. Invalid raw JSON (which
// encoding/json would refuse) is written as null.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	if compactSafe(raw) {
		return append(b, raw...)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return append(b, "null"...)
	}
	start := len(b)
	b = append(b, buf.Bytes()...)
	if bytes.ContainsAny(b[start:], "<>&\u2028\u2029") {
		out := bytes.NewBuffer(b[:start:start])
		json.HTMLEscape(out, buf.Bytes())
		return out.Bytes()
	}
	return b
}

// compactSafe reports whether raw can be copied as is: plain ASCII with no
// white space and nothing HTML-escaping would touch, and valid JSON.
func compactSafe(raw []byte) bool {
	for _, c := range raw {
		if c <= ' ' || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return json.Valid(raw)
}

// appendString writes s as a JSON string exactly as encoding/json does with
// HTML escaping on (canon.AppendEscaped, HTMLSafe).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b, _ = canon.AppendEscaped(b, s, canon.HTMLSafe)
	return append(b, '"')
}

// appendStringBody writes the escaped characters of s, without quotes.
func appendStringBody(b []byte, s string) []byte {
	b, _ = canon.AppendEscaped(b, s, canon.HTMLSafe)
	return b
}
