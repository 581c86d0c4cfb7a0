package job

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func flowReq(t *testing.T, extra string) *Request {
	t.Helper()
	req, err := DecodeSubmission([]byte(`{"type":"permit_report","params":{"case_id":47,"revision":29}`+extra+`}`), stubTypes{})
	require.NoError(t, err, extra)
	return req
}

// The flow fields are part of the fingerprint, normalized: a request
// without them keeps its fingerprint of earlier versions; the default
// priority is the same request as none; an instant in another offset, or
// a delay written otherwise, is the same request; anything else differs.
func TestFlowFieldsInTheFingerprint(t *testing.T) {
	t.Parallel()
	plain := flowReq(t, "")
	require.Equal(t, `{"params":{"case_id":47,"pages":10,"revision":29},"type":"permit_report"}`, string(plain.Canonical))
	require.Equal(t, plain.Fingerprint, flowReq(t, `,"priority":3`).Fingerprint, "the default priority is no priority")

	at := flowReq(t, `,"run_at":"2026-12-05T09:00:00Z","priority":1,"start_by":"2026-12-05T10:00:00Z"`)
	require.Equal(t, `{"params":{"case_id":47,"pages":10,"revision":29},"priority":1,"run_at":"2026-12-05T09:00:00Z","start_by":"2026-12-05T10:00:00Z","type":"permit_report"}`, string(at.Canonical))
	require.Equal(t, `{"case_id":47,"pages":10,"revision":29}`, string(at.Params))
	require.Equal(t, at.Fingerprint, flowReq(t, `,"start_by":"2026-12-05T11:00:00+01:00","priority":1,"run_at":"2026-12-05T10:00:00+01:00"`).Fingerprint)

	d := flowReq(t, `,"delay":"90s"`)
	require.Equal(t, `{"delay":"1m30s","params":{"case_id":47,"pages":10,"revision":29},"type":"permit_report"}`, string(d.Canonical))
	require.Equal(t, d.Fingerprint, flowReq(t, `,"delay":"1m30s"`).Fingerprint)

	seen := map[string]string{}
	for _, extra := range []string{"", `,"priority":1`, `,"priority":5`, `,"delay":"90s"`, `,"delay":"91s"`,
		`,"run_at":"2026-12-05T09:00:00Z"`, `,"run_at":"2026-12-05T09:00:01Z"`, `,"start_by":"2026-12-05T09:00:00Z"`} {
		fp := flowReq(t, extra).Fingerprint
		require.NotContains(t, seen, fp, "%s is the same request as %s", extra, seen[fp])
		seen[fp] = extra
	}
}

// Bad flow fields answer 422 with a pointer at each.
func TestFlowFieldsValidation(t *testing.T) {
	t.Parallel()
	for extra, fields := range map[string][]string{
		`,"run_at":"tomorrow"`:               {"/run_at"},
		`,"run_at":1733389200`:               {"/run_at"},
		`,"start_by":"2026-13-01T00:00:00Z"`: {"/start_by"},
		`,"delay":"soon"`:                    {"/delay"},
		`,"delay":"-5s"`:                     {"/delay"},
		`,"delay":"721h"`:                    {"/delay"},
		`,"delay":90`:                        {"/delay"},
		`,"priority":0`:                      {"/priority"},
		`,"priority":6`:                      {"/priority"},
		`,"priority":2.5`:                    {"/priority"},
		`,"priority":"1"`:                    {"/priority"},
		`,"run_at":"2026-12-05T09:00:00Z","delay":"1m"`:                      {"/delay"},
		`,"run_at":"2026-12-05T09:00:00Z","start_by":"2026-12-05T08:59:59Z"`: {"/start_by"},
		`,"prio":1`: {"/prio"},
	} {
		_, err := DecodeSubmission([]byte(`{"type":"permit_report","params":{"case_id":47,"revision":29}`+extra+`}`), stubTypes{})
		var ve *ValidationError
		require.True(t, errors.As(err, &ve), "%s: %v", extra, err)
		var got []string
		for _, e := range ve.Errors {
			got = append(got, e.Field)
		}
		require.Equal(t, fields, got, extra)
	}
}

// A run_at too far ahead is refused at admission; a delay resolves
// against the admission's time, and a run_at ahead starts the job
// scheduled (a past one, queued).
func TestFlowScheduleAndApply(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	far := flowReq(t, `,"run_at":"2027-01-03T09:00:01Z"`)
	var ve *ValidationError
	require.True(t, errors.As(far.Flow.CheckSchedule(now, MaxScheduleAhead), &ve))
	require.Equal(t, "/run_at", ve.Errors[0].Field)
	require.NoError(t, flowReq(t, `,"run_at":"2027-01-03T09:00:00Z"`).Flow.CheckSchedule(now, MaxScheduleAhead))
	require.Error(t, flowReq(t, `,"delay":"700h"`).Flow.CheckSchedule(now, 24*time.Hour), "a deployment's shorter bound")

	r := &Record{State: StateQueued, CreatedAt: now}
	flowReq(t, `,"delay":"90s","priority":2`).Flow.Apply(r)
	require.Equal(t, StateScheduled, r.State)
	require.Equal(t, now.Add(90*time.Second), *r.RunAt)
	require.Equal(t, 2, r.Priority)

	past := &Record{State: StateQueued, CreatedAt: now}
	flowReq(t, `,"run_at":"2026-12-04T08:00:00Z"`).Flow.Apply(past)
	require.Equal(t, StateQueued, past.State, "a run_at in the past is due at once")
	data, err := json.Marshal(past.Resource("", now))
	require.NoError(t, err)
	require.Contains(t, string(data), `"run_at":"2026-12-04T08:00:00Z"`)
}
