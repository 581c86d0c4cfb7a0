package egress

import (
	"errors"
	"net/url"
	"strings"
)

// RedactURL is a URL of a user's (a webhook, an endpoint) as logs, errors
// and listings show it:
// scheme://host[:port], and "/…" when the URL has more. Receivers put their
// tokens in path and query (and some in user info), so only the part that
// says where a delivery went is ever written down.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "(invalid URL)"
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		out += "/…"
	}
	return out
}

// RedactErr rewrites the URL an HTTP client error quotes ("Post \"<url>\":
// dial tcp ...") to its redacted form; the chain under it stays intact for
// errors.Is. Any other error is scrubbed of the raw URL as a last resort.
func RedactErr(err error, raw string) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.URL == raw {
		c := *ue
		c.URL = RedactURL(raw)
		return &c
	}
	if strings.Contains(err.Error(), raw) {
		return &scrubbed{msg: strings.ReplaceAll(err.Error(), raw, RedactURL(raw)), err: err}
	}
	return err
}

// scrubbed is an error whose text has its URL redacted.
type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }
