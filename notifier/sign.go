package notifier

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Standard Webhooks header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// secretPrefix marks a Standard Webhooks secret: the rest is base64.
const secretPrefix = "whsec_"

// DecodeSecret returns the signing key of a configured secret:
// "whsec_<base64>" decodes per Standard Webhooks, anything else is used raw.
func DecodeSecret(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, secretPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("webhook secret: bad base64 after %s: %w", secretPrefix, err)
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

// Sign returns the webhook-signature header value of a delivery:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
