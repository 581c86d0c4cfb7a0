package job

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The hand-built encoders must write exactly what encoding/json writes, so
// stored records and responses do not change with them.
func TestEncodersMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 23, 4, 5, 123456789, time.UTC)
	round := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	odd := "quote\" back\\ <b>&amp; \n\r\t\b\f \x01 \x7f é 漢 \u2028 \u2029 \xff end"
	records := []*Record{
		{ID: "job_a", Tenant: "4", Requester: "reviewer-47", KeyHash: "0011", Fingerprint: "ff",
			Type: "permit_report", Params: json.RawMessage(`{"case_id":47,"pages":63,"revision":29}`),
			State: StateQueued, CreatedAt: now, UpdatedAt: now},
		{ID: "job_b", Tenant: "t", Requester: "r", Type: "permit_report", Params: json.RawMessage(" {\"a\" : [1, 2], \"h\":\"<&>\"} "),
			State: StateRunning, Attempt: 2, MaxAttempts: 5, TimeoutSeconds: 90, CreatedAt: round, UpdatedAt: now, StartedAt: &now, RetryAt: &round, HeartbeatAt: &now,
			Worker: odd, Progress: &Progress{Done: 12, Total: 63, Unit: "pages"}},
		{ID: "job_c", State: StateFailed, CreatedAt: now, UpdatedAt: now, FinishedAt: &now,
			Error: &Failure{Category: CategoryTimeout, Message: odd, Retryable: true}},
		{ID: "job_d", State: StateSucceeded, Params: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now, StartedAt: &round, FinishedAt: &now,
			Output: &Output{Object: "job_d", ContentType: "application/pdf", Size: 156261, SHA256: "abc"}},
		{ID: "job_e", State: StateScheduled, CreatedAt: now, UpdatedAt: now, RunAt: &round, StartBy: &now, Priority: 5},
		{ID: "job_f", State: StateQueued, CreatedAt: now, UpdatedAt: now, Priority: DefaultPriority},
		{},
	}
	for i, r := range records {
		want, err := json.Marshal(r)
		require.NoError(t, err)
		require.Equal(t, string(want), string(r.AppendJSON(nil)), "record %d", i)
		got, err := r.Marshal()
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "record %d via Marshal", i)
		for _, href := range []string{"", "/v1/results/x.y"} {
			res := r.Resource(href, now)
			want, err := json.Marshal(res)
			require.NoError(t, err)
			require.Equal(t, string(want), string(AppendResource(nil, res)), "resource %d href %q", i, href)
			require.Equal(t, string(want), string(r.AppendResourceJSON(nil, href, now)), "record %d as resource, href %q", i, href)
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
	r := &Record{ID: "job_abcdefghijklmnopqrstuvwxyz", Tenant: "4", Requester: "reviewer-47", KeyHash: "0123456789abcdef",
		Fingerprint: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Type: "permit_report",
		Params: json.RawMessage(`{"case_id":47,"pages":63,"revision":29}`), State: StateQueued, CreatedAt: now, UpdatedAt: now}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestIDDeriverMatchesDeriveID(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef")
	d := NewIDDeriver(secret)
	for _, c := range [][3]string{{"4", "reviewer-47", "r-63"}, {"t", "r", ""}, {"a", "b", string(make([]byte, 255))}} {
		require.Equal(t, DeriveID(secret, c[0], c[1], c[2]), d.Derive(c[0], c[1], c[2]))
		require.Equal(t, DeriveID(secret, c[0], c[1], c[2]), d.Derive(c[0], c[1], c[2]), "again, from the pool")
	}
}

func BenchmarkDeriveID(b *testing.B) {
	d := NewIDDeriver([]byte("0123456789abcdef"))
	b.ReportAllocs()
	for b.Loop() {
		d.Derive("4", "reviewer-47", "r-63")
	}
}
