package codec

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// checkFastUnmarshal: whatever the fast path accepts, encoding/json accepts
// with the very same record.
func checkFastUnmarshal(t *testing.T, data []byte) bool {
	var fast job.Record
	if !fastUnmarshal(&fast, data) {
		return false
	}
	var want job.Record
	require.NoError(t, json.Unmarshal(data, &want), "fast path accepted what encoding/json refuses: %q", data)
	require.Equal(t, want, fast, "%q", data)
	return true
}

func sampleRecords() []*job.Record {
	now := time.Date(2026, 11, 29, 23, 4, 5, 123456789, time.UTC)
	later := now.Add(90 * time.Second)
	return []*job.Record{
		{ID: "job_a", Tenant: "4", Requester: "reviewer-47", KeyHash: "0011", Fingerprint: "ff",
			Type: "permit_report", Params: json.RawMessage(`{"case_id":47,"pages":63,"revision":29}`),
			State: job.StateQueued, CreatedAt: now, UpdatedAt: now},
		{ID: "job_b", Tenant: "t", Requester: "r", Type: "permit_report", Params: json.RawMessage(`{"a":[1,-2.5e3,true,null,{"b":"c"}]}`),
			State: job.StateRunning, Attempt: 2, MaxAttempts: 4, TimeoutSeconds: 7, CreatedAt: now, UpdatedAt: later, StartedAt: &now, RetryAt: &later, HeartbeatAt: &later,
			Worker: "host-1-abc", GivenBack: 1, Progress: &job.Progress{Done: 12, Total: 63, Unit: "pages"}},
		{ID: "job_c", State: job.StateFailed, CreatedAt: now, UpdatedAt: now, FinishedAt: &now, Attempt: 3,
			Error: &job.Failure{Category: job.CategoryTimeout, Message: "render took longer than 2m0s", Retryable: true}},
		{ID: "job_d", State: job.StateSucceeded, Params: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now, StartedAt: &now, FinishedAt: &later,
			Output: &job.Output{Object: "job_d", ContentType: "application/pdf", Size: 156261, SHA256: "abc"}, Batch: "bat_d", BatchNotify: "each"},
		{ID: "job_e", State: job.StateScheduled, CreatedAt: now, UpdatedAt: now, RunAt: &later, Priority: 1, StartBy: &later},
		{ID: "job_f", State: job.StateCanceled, CreatedAt: now, UpdatedAt: later, FinishedAt: &later, StartBy: &now, Priority: 3,
			Error: &job.Failure{Category: job.CategoryDeadline, Message: "no attempt had started"}},
		{},
	}
}

func TestUnmarshalRecordFastPathMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for i, r := range sampleRecords() {
		data, err := MarshalRecord(r)
		require.NoError(t, err)
		require.True(t, checkFastUnmarshal(t, data), "record %d written by MarshalRecord takes the fast path", i)
		got, err := UnmarshalRecord(data, 7)
		require.NoError(t, err)
		require.Equal(t, uint64(7), got.Revision)
		again, err := MarshalRecord(got)
		require.NoError(t, err)
		require.Equal(t, string(data), string(again), "record %d round trip", i)
	}
	// Shapes the fast path leaves to encoding/json, which still decodes them.
	for _, s := range []string{
		`{"id":"job_\u0061"}`, `{"ID":"x"}`, `{"id":"é"}`, `{"progress":null}`, `{"attempt":1.0}`,
		`{"attempt":01}`, `{"id":"a","id":"b"}`, `{"unknown":1}`, `{"created_at":"yesterday"}`,
		`{"progress":{"done":1,"done":2}}`, `{"error":{"retryable":"yes"}}`, `{"id":"a"} x`, `{"attempt":12345678901234567}`,
	} {
		require.False(t, checkFastUnmarshal(t, []byte(s)), "fast path should leave %q to encoding/json", s)
		var want job.Record
		wantErr := json.Unmarshal([]byte(s), &want)
		got, err := UnmarshalRecord([]byte(s), 1)
		if wantErr != nil {
			require.Error(t, err, s)
			continue
		}
		require.NoError(t, err, s)
		want.Revision = 1
		require.Equal(t, &want, got, s)
	}
}

// FuzzUnmarshalRecord: the fast path never decodes differently from
// encoding/json, and whatever UnmarshalRecord reads, MarshalRecord writes back
// in a form that reads back as the same record and encodes to the same
// bytes again (one pass normalizes white space, escapes and invalid UTF-8).
func FuzzUnmarshalRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		data, _ := MarshalRecord(r)
		f.Add(data)
	}
	data, _ := MarshalRecord(fullRecord(f))
	f.Add(data)
	f.Add([]byte(`{"id":"job_\u0061","params":{"a" : [1, 2.5e3]},"error":{"message":"<\u2028>"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastUnmarshal(t, data)
		r1, err := UnmarshalRecord(data, 1)
		if err != nil {
			return
		}
		d2, err := MarshalRecord(r1)
		if err != nil {
			// Only a time encoding/json cannot write either (a year past 9999).
			_, jerr := json.Marshal(r1)
			require.Error(t, jerr, "MarshalRecord refused what encoding/json writes: %v", err)
			return
		}
		r2, err := UnmarshalRecord(d2, 1)
		require.NoError(t, err, "%q read back from %q", d2, data)
		checkFastUnmarshal(t, d2)
		d3, err := MarshalRecord(r2)
		require.NoError(t, err)
		require.Equal(t, string(d2), string(d3), "MarshalRecord is stable after one pass")
	})
}

func BenchmarkUnmarshalRecord(b *testing.B) {
	data, _ := MarshalRecord(sampleRecords()[1])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := UnmarshalRecord(data, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalRecordEncodingJSON(b *testing.B) {
	data, _ := MarshalRecord(sampleRecords()[1])
	b.ReportAllocs()
	for b.Loop() {
		var r job.Record
		if err := json.Unmarshal(data, &r); err != nil {
			b.Fatal(err)
		}
	}
}
