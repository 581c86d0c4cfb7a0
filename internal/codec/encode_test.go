package codec

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// The hand-built encoders must write exactly what encoding/json writes, so
// stored records and responses do not change with them.
func TestEncodersMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 23, 4, 5, 123456789, time.UTC)
	round := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	odd := "quote\" back\\ <b>&amp; \n\r\t\b\f \x01 \x7f é 漢 \u2028 \u2029 \xff end"
	records := []*job.Record{
		{ID: "job_a", Tenant: "4", Requester: "reviewer-47", KeyHash: "0011", Fingerprint: "ff",
			Type: "permit_report", Params: json.RawMessage(`{"case_id":47,"pages":63,"revision":29}`),
			State: job.StateQueued, CreatedAt: now, UpdatedAt: now},
		{ID: "job_b", Tenant: "t", Requester: "r", Type: "permit_report", Params: json.RawMessage(" {\"a\" : [1, 2], \"h\":\"<&>\"} "),
			State: job.StateRunning, Attempt: 2, MaxAttempts: 5, TimeoutSeconds: 90, CreatedAt: round, UpdatedAt: now, StartedAt: &now, RetryAt: &round, HeartbeatAt: &now,
			Worker: odd, Progress: &job.Progress{Done: 12, Total: 63, Unit: "pages"}},
		{ID: "job_c", State: job.StateFailed, CreatedAt: now, UpdatedAt: now, FinishedAt: &now,
			Error: &job.Failure{Category: job.CategoryTimeout, Message: odd, Retryable: true}},
		{ID: "job_d", State: job.StateSucceeded, Params: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now, StartedAt: &round, FinishedAt: &now,
			Output: &job.Output{Object: "job_d", ContentType: "application/pdf", Size: 156261, SHA256: "abc"}},
		{ID: "job_e", State: job.StateScheduled, CreatedAt: now, UpdatedAt: now, RunAt: &round, StartBy: &now, Priority: 5},
		{ID: "job_f", State: job.StateQueued, CreatedAt: now, UpdatedAt: now, Priority: job.DefaultPriority},
		{},
	}
	for i, r := range records {
		want, err := json.Marshal(r)
		require.NoError(t, err)
		require.Equal(t, string(want), string(AppendRecord(nil, r)), "record %d", i)
		got, err := MarshalRecord(r)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "record %d via MarshalRecord", i)
		for _, href := range []string{"", "/v1/results/x.y"} {
			res := r.Resource(href, now)
			want, err := json.Marshal(res)
			require.NoError(t, err)
			require.Equal(t, string(want), string(AppendResource(nil, res)), "resource %d href %q", i, href)
			require.Equal(t, string(want), string(AppendRecordResource(nil, r, href, now)), "record %d as resource, href %q", i, href)
		}
	}
}

func TestAppendStringMatchesEncodingJSONForEveryByte(t *testing.T) {
	t.Parallel()
	for c := range 256 {
		s := "a" + string([]byte{byte(c)}) + "z"
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendString(nil, s)), "byte %#x", c)
	}
}

func BenchmarkRecordMarshal(b *testing.B) {
	now := time.Now()
	r := &job.Record{ID: "job_abcdefghijklmnopqrstuvwxyz", Tenant: "4", Requester: "reviewer-47", KeyHash: "0123456789abcdef",
		Fingerprint: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Type: "permit_report",
		Params: json.RawMessage(`{"case_id":47,"pages":63,"revision":29}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MarshalRecord(r); err != nil {
			b.Fatal(err)
		}
	}
}
