package job

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFingerprintIgnoresFormOnly(t *testing.T) {
	t.Parallel()
	reg := DefaultRegistry()
	base, err := reg.DecodeRequest([]byte(`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`))
	require.NoError(t, err)
	for _, body := range []string{
		`{"params":{"pages":63,"revision":29,"case_id":47},"type":"permit_report"}`,
		"{\n  \"type\": \"permit_report\",\n  \"params\": { \"case_id\": 47.0, \"revision\": 29.00, \"pages\": 6.3e1 }\n}",
	} {
		r, err := reg.DecodeRequest([]byte(body))
		require.NoError(t, err, body)
		require.Equal(t, base.Fingerprint, r.Fingerprint, body)
		require.Equal(t, base.Canonical, r.Canonical)
	}
	other, err := reg.DecodeRequest([]byte(`{"type":"permit_report","params":{"case_id":47,"revision":30,"pages":63}}`))
	require.NoError(t, err)
	require.NotEqual(t, base.Fingerprint, other.Fingerprint)
	def, err := reg.DecodeRequest([]byte(`{"type":"permit_report","params":{"case_id":47,"revision":29}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"case_id":47,"revision":29,"pages":10}`, string(def.Params))
}

func TestDecodeRequestErrors(t *testing.T) {
	t.Parallel()
	reg := DefaultRegistry()
	for body, want := range map[string]error{
		``:                                     ErrMalformed,
		`{`:                                    ErrMalformed,
		`null`:                                 ErrMalformed,
		`"x"`:                                  ErrMalformed,
		`{} {}`:                                ErrMalformed,
		`{}`:                                   ErrValidation,
		`{"type":"nope"}`:                      ErrValidation,
		`{"type":"permit_report"}`:             ErrValidation,
		`{"type":"permit_report","params":[]}`: ErrValidation,
		`{"type":"permit_report","params":{"case_id":1.5,"revision":1}}`:         ErrValidation,
		`{"type":"permit_report","params":{"case_id":1e300,"revision":1}}`:       ErrValidation,
		`{"type":"permit_report","params":{"case_id":1,"revision":1,"pages":0}}`: ErrValidation,
		`{"type":"permit_report","params":{"case_id":1,"revision":1},"x":1}`:     ErrValidation,
	} {
		_, err := reg.DecodeRequest([]byte(body))
		require.ErrorIs(t, err, want, "%q", body)
	}
}

func TestStateRules(t *testing.T) {
	t.Parallel()
	require.True(t, StateQueued.CanTransition(StateRunning))
	require.True(t, StateQueued.CanTransition(StateCanceled))
	require.True(t, StateRunning.CanTransition(StateSucceeded))
	require.False(t, StateSucceeded.CanTransition(StateRunning))
	require.False(t, StateRunning.CanTransition(StateQueued))
	require.False(t, StateCanceled.CanTransition(StateCanceled))
	r := &Record{State: StateFailed}
	require.ErrorIs(t, r.Transition(StateRunning, r.CreatedAt), ErrInvalidState)
}

func TestDeriveIDIsScoped(t *testing.T) {
	t.Parallel()
	s := []byte("secret")
	a := DeriveID(s, "4", "reviewer-47", "r-63")
	require.True(t, ValidID(a), a)
	require.Equal(t, a, DeriveID(s, "4", "reviewer-47", "r-63"))
	require.NotEqual(t, a, DeriveID(s, "5", "reviewer-47", "r-63"))
	require.NotEqual(t, a, DeriveID(s, "4", "reviewer-48", "r-63"))
	require.NotEqual(t, a, DeriveID(s, "4", "reviewer-4", "7r-63"), "separators keep scopes apart")
	require.NotEqual(t, a, DeriveID([]byte("other"), "4", "reviewer-47", "r-63"))
}

// FuzzDecodeRequest: any input either decodes or fails with a known
// sentinel, never panics, and a decoded request's canonical form is a fixed
// point (decoding it again yields the same bytes and fingerprint).
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`,
		`{"type":"permit_report","params":{"case_id":47.0,"revision":2.9e1}}`,
		`{"type":"permit_report","params":{"case_id":-1,"revision":"x","extra":null}}`,
		`{"type":1}`, `[]`, `{`, `null`, `{"type":"permit_report","params":{"pages":1e400}}`,
	} {
		f.Add([]byte(s))
	}
	reg := DefaultRegistry()
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := reg.DecodeRequest(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrValidation) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		again, err := reg.DecodeRequest(r.Canonical)
		if err != nil {
			t.Fatalf("canonical form does not decode: %s: %v", r.Canonical, err)
		}
		if string(again.Canonical) != string(r.Canonical) || again.Fingerprint != r.Fingerprint {
			t.Fatalf("canonical form not stable: %s vs %s", r.Canonical, again.Canonical)
		}
		if !json.Valid(r.Params) {
			t.Fatalf("params not valid JSON: %s", r.Params)
		}
	})
}

func BenchmarkFingerprint(b *testing.B) {
	reg := DefaultRegistry()
	body := []byte(`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.DecodeRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// Fingerprints of stored permit_report jobs were computed by the first
// decoder; whatever decodes submissions must keep giving these exact
// values, or a retry of an old request would answer 409.
var pinnedFingerprints = []struct{ body, canonical, fingerprint string }{
	{`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`,
		`{"params":{"case_id":47,"pages":63,"revision":29},"type":"permit_report"}`,
		"254e2692e84c05912ffa04644ab131847c592e59f63eb5d2de7af5753d7b27c9"},
	{`{"type":"permit_report","params":{"case_id":47,"revision":29}}`,
		`{"params":{"case_id":47,"pages":10,"revision":29},"type":"permit_report"}`,
		"8d23ea64891ffb70ec1337afe8ff9ca616e16055f7b9077808ef8b3ff0c10642"},
}

func TestRegistryFingerprintsArePinned(t *testing.T) {
	t.Parallel()
	for _, p := range pinnedFingerprints {
		r, err := DefaultRegistry().DecodeRequest([]byte(p.body))
		require.NoError(t, err)
		require.Equal(t, p.canonical, string(r.Canonical))
		require.Equal(t, p.fingerprint, r.Fingerprint)
	}
}
