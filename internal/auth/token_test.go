package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jobgate/jobgate/internal/job"
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

// signRaw signs a token whose header and payload are the JSON given, byte
// for byte, so a test can write claims no library would.
func signRaw(secret []byte, header, payload string) string {
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

const hs256 = `{"alg":"HS256","typ":"JWT"}`

// Claims that encoding/json or jwt.NumericDate would take but that no
// token of this deployment carries are refused: a non-integer exp (a
// string, a fraction, an exponent), an iat ahead of the clock by more than
// the allowed skew, and a crit header (RFC 7515 §4.1.11: the extensions it
// names are ones this verifier does not understand).
func TestVerifyRefusesOddClaims(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	now := time.Unix(1_800_000_000, 0)
	v := NewVerifier(secret, func() time.Time { return now })
	exp := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	iat := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	ok := func(payload string) {
		t.Helper()
		_, err := v.Verify(signRaw(secret, hs256, payload))
		require.NoError(t, err, payload)
	}
	refused := func(header, payload string) {
		t.Helper()
		_, err := v.Verify(signRaw(secret, header, payload))
		require.ErrorIs(t, err, job.ErrUnauthorized, "%s %s", header, payload)
	}
	ok(`{"tenant":"4","sub":"x","exp":` + exp + `}`)
	ok(`{"tenant":"4","sub":"x","exp":` + exp + `,"iat":` + iat(0) + `}`)
	ok(`{"tenant":"4","sub":"x","exp":` + exp + `,"iat":` + iat(MaxIssuedAtSkew) + `}`)
	ok(`{"tenant":"4","sub":"x","exp":` + exp + `,"iat":` + iat(-24*time.Hour) + `}`)

	refused(hs256, `{"tenant":"4","sub":"x","exp":"`+exp+`"}`)
	refused(hs256, `{"tenant":"4","sub":"x","exp":`+exp+`.5}`)
	refused(hs256, `{"tenant":"4","sub":"x","exp":`+exp+`.0}`)
	refused(hs256, `{"tenant":"4","sub":"x","exp":1.9e9}`)
	refused(hs256, `{"tenant":"4","sub":"x","exp":null}`)
	refused(hs256, `{"tenant":"4","sub":"x","exp":true}`)
	refused(hs256, `{"tenant":"4","sub":"x","exp":`+exp+`,"iat":`+iat(MaxIssuedAtSkew+time.Second)+`}`)
	refused(hs256, `{"tenant":"4","sub":"x","exp":`+exp+`,"iat":`+iat(24*time.Hour)+`}`)
	refused(hs256, `{"tenant":"4","sub":"x","exp":`+exp+`,"iat":"`+iat(0)+`"}`)
	refused(`{"alg":"HS256","typ":"JWT","crit":["exp"]}`, `{"tenant":"4","sub":"x","exp":`+exp+`}`)
	refused(`{"alg":"HS256","crit":["b64"],"b64":false}`, `{"tenant":"4","sub":"x","exp":`+exp+`}`)
	refused(`{"alg":"HS256","crit":[]}`, `{"tenant":"4","sub":"x","exp":`+exp+`}`)
}

// With an audience and an issuer configured a token must name both (aud as
// a string or in an array); without, neither is looked at. Mint writes
// what it is given, so `jobgate token` mints tokens the gateway takes.
func TestAudienceAndIssuer(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	now := time.Now()
	exp := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	strict := NewVerifier(secret, nil, WithAudience("jobgate-api"), WithIssuer("https://login.example.com"))
	lax := NewVerifier(secret, nil)
	for payload, want := range map[string]bool{
		`{"tenant":"4","sub":"x","exp":` + exp + `,"aud":"jobgate-api","iss":"https://login.example.com"}`:           true,
		`{"tenant":"4","sub":"x","exp":` + exp + `,"aud":["other","jobgate-api"],"iss":"https://login.example.com"}`: true,
		`{"tenant":"4","sub":"x","exp":` + exp + `,"aud":"other","iss":"https://login.example.com"}`:                 false,
		`{"tenant":"4","sub":"x","exp":` + exp + `,"iss":"https://login.example.com"}`:                               false,
		`{"tenant":"4","sub":"x","exp":` + exp + `,"aud":"jobgate-api","iss":"https://evil.example.com"}`:            false,
		`{"tenant":"4","sub":"x","exp":` + exp + `,"aud":"jobgate-api"}`:                                             false,
		`{"tenant":"4","sub":"x","exp":` + exp + `}`:                                                                 false,
	} {
		tok := signRaw(secret, hs256, payload)
		_, err := strict.Verify(tok)
		if want {
			require.NoError(t, err, payload)
		} else {
			require.ErrorIs(t, err, job.ErrUnauthorized, payload)
		}
		_, err = lax.Verify(tok)
		require.NoError(t, err, "nothing configured, nothing checked: %s", payload)
	}

	tok, err := Mint(secret, Identity{Tenant: "4", Requester: "x"}, time.Hour, now,
		WithAudience("jobgate-api"), WithIssuer("https://login.example.com"))
	require.NoError(t, err)
	_, err = strict.Verify(tok)
	require.NoError(t, err, "a minted token carries the configured aud and iss")
	plain, err := Mint(secret, Identity{Tenant: "4", Requester: "x"}, time.Hour, now)
	require.NoError(t, err)
	_, err = strict.Verify(plain)
	require.ErrorIs(t, err, job.ErrUnauthorized, "a token without them is refused where they are configured")
	_, err = NewVerifier(secret, nil, WithAudience("another-api")).Verify(tok)
	require.ErrorIs(t, err, job.ErrUnauthorized, "another deployment's audience")
}

// An operator token may leave the tenant out; any other token needs one,
// and "operator" must be the JSON true to count.
func TestOperatorTokens(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	now := time.Unix(1_800_000_000, 0)
	v := NewVerifier(secret, func() time.Time { return now })
	tok, err := Mint(secret, Identity{Requester: "ops-1", Operator: true}, time.Hour, now)
	require.NoError(t, err)
	id, err := v.Verify(tok)
	require.NoError(t, err)
	require.True(t, id.Operator)
	require.Empty(t, id.Tenant)

	_, err = Mint(secret, Identity{Requester: "ops-1"}, time.Hour, now)
	require.Error(t, err, "a tenant is required of anyone else")

	exp := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	_, err = v.Verify(signRaw(secret, hs256, `{"sub":"x","exp":`+exp+`}`))
	require.ErrorIs(t, err, job.ErrUnauthorized, "no tenant, not an operator")
	_, err = v.Verify(signRaw(secret, hs256, `{"sub":"x","operator":"true","exp":`+exp+`}`))
	require.ErrorIs(t, err, job.ErrUnauthorized, "operator must be a boolean")
	id, err = v.Verify(signRaw(secret, hs256, `{"tenant":"4","sub":"x","operator":false,"exp":`+exp+`}`))
	require.NoError(t, err)
	require.False(t, id.Operator)
}
