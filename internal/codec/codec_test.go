package codec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// filler gives every field of a value a distinct non-zero value, so a
// round trip that drops or swaps one shows. It knows the kinds Record is made
// of; a field of another kind fails the test, which then needs a case here
// (and the codecs one each).
type filler struct {
	t testing.TB
	n int
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

func (f *filler) fill(v reflect.Value, path string) {
	f.t.Helper()
	f.n++
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 23, 4, 5, 123456789, time.UTC).Add(time.Duration(f.n) * time.Hour)))
		return
	case v.Type() == rawType:
		v.SetBytes([]byte(fmt.Sprintf(`{"k":%d}`, f.n)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", f.n))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(f.n))
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		v.SetUint(uint64(f.n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), path)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range s.Len() {
			f.fill(s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			require.True(f.t, sf.IsExported(), "%s.%s: unexported fields are not stored", path, sf.Name)
			f.fill(v.Field(i), path+"."+sf.Name)
		}
	default:
		f.t.Fatalf("%s: no filler for %s; add a case here and to the record codecs (encode.go, decode.go)", path, v.Type())
	}
	require.False(f.t, v.IsZero(), path)
}

// fullRecord is a Record with every field, and every field of the structs
// it owns, set to a non-zero value.
func fullRecord(t testing.TB) *job.Record {
	t.Helper()
	r := &job.Record{}
	(&filler{t: t}).fill(reflect.ValueOf(r).Elem(), "Record")
	return r
}

// roundTrip encodes r with the hand-written encoder, requires exactly the
// bytes encoding/json writes, decodes them on the fast path and requires
// the very same record back.
func roundTrip(t *testing.T, r *job.Record, what string) {
	t.Helper()
	data, err := MarshalRecord(r)
	require.NoError(t, err, what)
	want, err := json.Marshal(r)
	require.NoError(t, err, what)
	require.Equal(t, string(want), string(data), "%s: the encoder writes what encoding/json writes", what)
	var fast job.Record
	require.True(t, fastUnmarshal(&fast, data), "%s: the fast decoder takes what the encoder wrote: %s", what, data)
	fast.Revision = r.Revision
	require.Equal(t, r, &fast, "%s: fast decoder", what)
	got, err := UnmarshalRecord(data, r.Revision)
	require.NoError(t, err, what)
	require.Equal(t, r, got, "%s: UnmarshalRecord", what)
}

// The record codecs cannot lose a field: a record with every field set
// (and, one at a time, with only one field set) comes back from
// MarshalRecord/UnmarshalRecord equal, through the fast decoder. A field added
// to Record (or to Progress, Failure, Output) without its case in
// AppendRecord and fastUnmarshal fails here.
func TestRecordCodecKeepsEveryField(t *testing.T) {
	t.Parallel()
	full := fullRecord(t)
	roundTrip(t, full, "every field")

	// One field at a time: no field rides on another (omitempty, order).
	// Absent params are stored as JSON null and read back as such, as
	// encoding/json does.
	null := json.RawMessage("null")
	fv := reflect.ValueOf(full).Elem()
	for i := range fv.NumField() {
		name := fv.Type().Field(i).Name
		one := &job.Record{Params: null}
		reflect.ValueOf(one).Elem().Field(i).Set(fv.Field(i))
		roundTrip(t, one, name)
	}
	// Zero values inside the structs a record owns (0, "", false) are
	// stored too.
	roundTrip(t, &job.Record{Params: null, Progress: &job.Progress{}, Error: &job.Failure{}, Output: &job.Output{}, Attempts: []job.Attempt{{}}}, "empty nested structs")
}

// The resource encoders write what encoding/json writes for every field of
// Resource, and AppendRecordResource what Resource() builds, in every state.
func TestResourceCodecKeepsEveryField(t *testing.T) {
	t.Parallel()
	res := &job.Resource{}
	(&filler{t: t}).fill(reflect.ValueOf(res).Elem(), "Resource")
	want, err := json.Marshal(res)
	require.NoError(t, err)
	require.Equal(t, string(want), string(AppendResource(nil, res)))

	r := fullRecord(t)
	expires := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, state := range []job.State{job.StateScheduled, job.StateQueued, job.StateRunning, job.StateSucceeded, job.StateFailed, job.StateCanceled} {
		r.State = state
		for _, href := range []string{"", "/v1/results/x.y"} {
			want, err := json.Marshal(r.Resource(href, expires))
			require.NoError(t, err)
			require.Equal(t, string(want), string(AppendRecordResource(nil, r, href, expires)), "%s, href %q", state, href)
		}
	}
	// A job canceled because it missed its start_by shows why.
	r.State, r.Error = job.StateCanceled, &job.Failure{Category: job.CategoryDeadline, Message: "late"}
	want, err = json.Marshal(r.Resource("", expires))
	require.NoError(t, err)
	require.Contains(t, string(want), `"category":"deadline_exceeded"`)
	require.Equal(t, string(want), string(AppendRecordResource(nil, r, "", expires)))
}

// The attempt history the lifecycle writes is stored with each attempt's
// full message, and the resource never shows it.
func TestAttemptHistoryIsStoredNotShown(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	r := &job.Record{ID: "job_x", State: job.StateQueued, CreatedAt: t0, UpdatedAt: t0}
	require.NoError(t, r.Claim("w1", t0.Add(time.Second)))
	f := &job.Failure{Category: job.CategoryRenderError, Message: "the job's worker reported an error", Retryable: true}
	require.NoError(t, r.ScheduleRetry(f, t0.Add(10*time.Second), t0.Add(2*time.Second)))
	r.NoteCause("render: font cache at /var/cache/x corrupt")
	require.NoError(t, r.Claim("w2", t0.Add(10*time.Second)))
	require.NoError(t, r.Succeed(&job.Output{Object: "o"}, t0.Add(11*time.Second)))
	require.Len(t, r.Attempts, 2)

	data, err := MarshalRecord(r)
	require.NoError(t, err)
	back, err := UnmarshalRecord(data, 7)
	require.NoError(t, err)
	require.Equal(t, r.Attempts, back.Attempts, "stored")
	require.Equal(t, "render: font cache at /var/cache/x corrupt", back.Attempts[0].Error.Message)
	body := string(AppendRecordResource(nil, back, "", time.Time{}))
	require.NotContains(t, body, "attempts")
	require.NotContains(t, body, "font cache")
}
