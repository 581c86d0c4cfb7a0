package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Verification errors.
var (
	ErrMissingHeaders = errors.New("missing webhook headers")
	ErrStale          = errors.New("webhook timestamp outside tolerance")
	ErrBadSignature   = errors.New("no valid webhook signature")
)

// decodeSecret turns "whsec_<base64>" into its key; other secrets are raw.
func decodeSecret(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, "whsec_"); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("secret: %w", err)
		}
		return key, nil
	}
	return []byte(s), nil
}

// verify checks a delivery per Standard Webhooks: the timestamp is within
// tolerance of now (against replays), and one of the space-separated
// "v1,<base64>" signatures is the HMAC-SHA256 of "id.timestamp.body".
func verify(key []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) (id string, err error) {
	id, tsText, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || tsText == "" || sigs == "" {
		return "", ErrMissingHeaders
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: %q", ErrStale, tsText)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return "", ErrStale
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + tsText + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		version, b64, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return id, nil
		}
	}
	return "", ErrBadSignature
}
