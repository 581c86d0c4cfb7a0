package notifier

import (
	"net/netip"

	"github.com/jobgate/jobgate/internal/egress"
	"github.com/jobgate/jobgate/internal/stdwebhook"
)

// The Standard Webhooks signing the notifier's deliveries use, shared with
// the endpoint caller (internal/stdwebhook).
const (
	HeaderID        = stdwebhook.HeaderID
	HeaderTimestamp = stdwebhook.HeaderTimestamp
	HeaderSignature = stdwebhook.HeaderSignature
)

// DecodeSecret returns the signing key of a configured secret
// (stdwebhook.DecodeSecret).
func DecodeSecret(s string) ([]byte, error) { return stdwebhook.DecodeSecret(s) }

// Sign returns the webhook-signature header value of a delivery
// (stdwebhook.Sign).
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	return stdwebhook.Sign(key, id, timestamp, body)
}

// ErrForbiddenAddress: a webhook URL resolved to an address that is not
// public and private webhooks are not allowed (egress.ErrForbiddenAddress).
var ErrForbiddenAddress = egress.ErrForbiddenAddress

// PublicAddr reports whether ip is a public unicast address a webhook may
// be delivered to by default (egress.PublicAddr).
func PublicAddr(ip netip.Addr) bool { return egress.PublicAddr(ip) }

// RedactURL is a webhook URL as logs and stored states show it
// (egress.RedactURL).
func RedactURL(raw string) string { return egress.RedactURL(raw) }

// redactErr rewrites the URL an HTTP client error quotes to its redacted
// form (egress.RedactErr).
func redactErr(err error, raw string) error { return egress.RedactErr(err, raw) }
