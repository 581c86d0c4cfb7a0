package stdwebhook

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Standard Webhooks specification's own example.
func TestSignMatchesTheSpecificationsExample(t *testing.T) {
	t.Parallel()
	key, err := DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)))
	require.Equal(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", EncodeSecret(key))
}

func TestVerifyAcceptsAnyOfTheSignaturesWithinTolerance(t *testing.T) {
	t.Parallel()
	old, err := NewKey()
	require.NoError(t, err)
	cur, err := NewKey()
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"job":{}}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := SignAll([][]byte{cur, old}, "job_x.a1", now.Unix(), body)
	for _, k := range [][]byte{cur, old} {
		require.NoError(t, Verify(k, "job_x.a1", ts, sig, body, now, 5*time.Minute))
	}
	other, _ := NewKey()
	require.ErrorIs(t, Verify(other, "job_x.a1", ts, sig, body, now, 5*time.Minute), ErrSignature)
	require.ErrorIs(t, Verify(cur, "job_x.a1", ts, sig, []byte(`{"job":{"x":1}}`), now, 5*time.Minute), ErrSignature)
	require.ErrorIs(t, Verify(cur, "job_x.a2", ts, sig, body, now, 5*time.Minute), ErrSignature)
	require.ErrorIs(t, Verify(cur, "job_x.a1", ts, sig, body, now.Add(6*time.Minute), 5*time.Minute), ErrTimestamp)
	require.ErrorIs(t, Verify(cur, "job_x.a1", ts, sig, body, now.Add(-6*time.Minute), 5*time.Minute), ErrTimestamp)
	require.ErrorIs(t, Verify(cur, "job_x.a1", "soon", sig, body, now, 5*time.Minute), ErrTimestamp)
	require.ErrorIs(t, Verify(cur, "job_x.a1", ts, "v2,abc", body, now, 5*time.Minute), ErrNoSignature)
	require.ErrorIs(t, Verify(cur, "", ts, sig, body, now, 5*time.Minute), ErrNoSignature)
}
