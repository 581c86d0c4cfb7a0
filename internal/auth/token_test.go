package auth

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/stretchr/testify/require"
)

func TestMintAndVerify(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	now := time.Now()
	tok, err := Mint(secret, Identity{Tenant: "4", Requester: "reviewer-47", Admin: true}, time.Hour, now)
	require.NoError(t, err)
	v := NewVerifier(secret, nil)
	id, err := v.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, "4", id.Tenant)
	require.Equal(t, "reviewer-47", id.Requester)
	require.True(t, id.Admin)

	_, err = NewVerifier([]byte("other"), nil).Verify(tok)
	require.ErrorIs(t, err, job.ErrUnauthorized, "another secret")

	later := NewVerifier(secret, func() time.Time { return now.Add(2 * time.Hour) })
	_, err = later.Verify(tok)
	require.ErrorIs(t, err, job.ErrUnauthorized, "expired")

	// A cached token expires too.
	clock := now
	cached := NewVerifier(secret, func() time.Time { return clock })
	_, err = cached.Verify(tok)
	require.NoError(t, err)
	clock = now.Add(2 * time.Hour)
	_, err = cached.Verify(tok)
	require.ErrorIs(t, err, job.ErrUnauthorized)
}

func TestVerifyRejectsForgeries(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	v := NewVerifier(secret, nil)
	exp := jwt.NewNumericDate(time.Now().Add(time.Hour))
	sign := func(m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, claims).SignedString(key)
		require.NoError(t, err)
		return s
	}
	for name, tok := range map[string]string{
		"alg none":   sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"tenant": "4", "sub": "x", "exp": exp}),
		"no exp":     sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"tenant": "4", "sub": "x"}),
		"bad tenant": sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"tenant": "4.5", "sub": "x", "exp": exp}),
		"no sub":     sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"tenant": "4", "exp": exp}),
		"wrong key":  sign(jwt.SigningMethodHS256, []byte("another secret"), jwt.MapClaims{"tenant": "4", "sub": "x", "exp": exp}),
		"garbage":    "a.b.c",
	} {
		_, err := v.Verify(tok)
		require.ErrorIs(t, err, job.ErrUnauthorized, name)
	}
	_, err := Mint(secret, Identity{Tenant: "a b", Requester: "x"}, time.Hour, time.Now())
	require.Error(t, err)
}

func TestLoadSecret(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	_, err := LoadSecret("", dir, false)
	require.Error(t, err, "nothing to read and not allowed to create")
	s1, err := LoadSecret("", dir, true)
	require.NoError(t, err)
	st, err := os.Stat(SecretFile(dir))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	s2, err := LoadSecret("", dir, false)
	require.NoError(t, err)
	require.Equal(t, s1, s2, "token reads what serve generated")
	s3, err := LoadSecret("configured", dir, false)
	require.NoError(t, err)
	require.Equal(t, []byte("configured"), s3)
}
