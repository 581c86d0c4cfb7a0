package job

import (
	"testing"

	"github.com/stretchr/testify/require"
)

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
