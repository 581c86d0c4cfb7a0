// Package stdwebhook signs and verifies HTTP requests as Standard Webhooks
// (standardwebhooks.com) does: the notifier's webhooks, the endpoint
// caller's requests to endpoint types, and pkg/endpoint, which a team's
// handler uses to check them, all read it from here (standard library
// only).
package stdwebhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix marks a Standard Webhooks secret: the rest is base64.
const SecretPrefix = "whsec_"

// DecodeSecret returns the signing key of a configured secret:
// "whsec_<base64>" decodes per Standard Webhooks, anything else is used raw.
func DecodeSecret(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, SecretPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("webhook secret: bad base64 after %s: %w", SecretPrefix, err)
		}
		if len(key) == 0 {
			return nil, errors.New("webhook secret: empty key")
		}
		return key, nil
	}
	if s == "" {
		return nil, errors.New("webhook secret: empty")
	}
	return []byte(s), nil
}

// EncodeSecret is the "whsec_<base64>" form of key.
func EncodeSecret(key []byte) string { return SecretPrefix + base64.StdEncoding.EncodeToString(key) }

// NewKey returns a fresh random signing key (32 bytes, as the Standard
// Webhooks libraries generate).
func NewKey() ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return key, nil
}

// Sign returns the webhook-signature header value of a delivery:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body))
}

// SignAll is the header value signed by every key, space separated, as
// Standard Webhooks sends a message during a key rotation.
func SignAll(keys [][]byte, id string, timestamp int64, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = Sign(k, id, timestamp, body)
	}
	return strings.Join(sigs, " ")
}

func mac(key []byte, id string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Errors of Verify.
var (
	// ErrNoSignature: a header is missing or holds no v1 signature.
	ErrNoSignature = errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	// ErrTimestamp: the timestamp is not a number or lies outside the
	// tolerance (a replayed or delayed request).
	ErrTimestamp = errors.New("webhook-timestamp too old, too new or not a number")
	// ErrSignature: no signature matches the key.
	ErrSignature = errors.New("no webhook-signature matches the secret")
)

// Verify checks that one of the space-separated "v1,<base64>" signatures
// of header sig was made with key over id, timestamp and body, and that the
// timestamp is within tolerance of now (either side).
func Verify(key []byte, id, timestamp, sig string, body []byte, now time.Time, tolerance time.Duration) error {
	if id == "" || timestamp == "" || sig == "" {
		return ErrNoSignature
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrTimestamp
	}
	want := mac(key, id, ts, body)
	seen := false
	for _, s := range strings.Fields(sig) {
		v, b64, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		seen = true
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	if !seen {
		return ErrNoSignature
	}
	return ErrSignature
}
