package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// linkSigner makes and checks result links. A link's token binds tenant,
// requester, job, the stored object's name and the expiry (whole seconds)
// under an HMAC, so a link cannot be moved to another file, scope or time.
type linkSigner struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

type linkClaims struct {
	Tenant, Requester, JobID, Object string
	Expires                          time.Time
}

var b64 = base64.RawURLEncoding

// sign returns the href of a fresh link and when it expires.
func (s *linkSigner) sign(tenant, requester, jobID, object string) (string, time.Time) {
	exp := s.now().Add(s.ttl).Truncate(time.Second)
	payload := strings.Join([]string{tenant, requester, jobID, object, strconv.FormatInt(exp.Unix(), 10)}, "\x00")
	tok := b64.EncodeToString([]byte(payload)) + "." + b64.EncodeToString(s.mac(payload))
	return "/v1/results/" + tok, exp
}

func (s *linkSigner) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// verify checks a token: tampering is job.ErrLinkInvalid, a valid but
// expired link job.ErrLinkExpired.
func (s *linkSigner) verify(token string) (linkClaims, error) {
	p64, m64, ok := strings.Cut(token, ".")
	if !ok {
		return linkClaims{}, fmt.Errorf("%w: malformed token", job.ErrLinkInvalid)
	}
	payload, err1 := b64.DecodeString(p64)
	mac, err2 := b64.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(string(payload))) {
		return linkClaims{}, fmt.Errorf("%w: bad signature", job.ErrLinkInvalid)
	}
	parts := strings.Split(string(payload), "\x00")
	if len(parts) != 5 {
		return linkClaims{}, fmt.Errorf("%w: malformed payload", job.ErrLinkInvalid)
	}
	exp, err := strconv.ParseInt(parts[4], 10, 64)
	if err != nil {
		return linkClaims{}, fmt.Errorf("%w: malformed expiry", job.ErrLinkInvalid)
	}
	c := linkClaims{Tenant: parts[0], Requester: parts[1], JobID: parts[2], Object: parts[3], Expires: time.Unix(exp, 0)}
	if !s.now().Before(c.Expires) {
		return c, job.Userf(job.ErrLinkExpired, "the link expired at %s; the job's result link gives a fresh one", c.Expires.UTC().Format(time.RFC3339))
	}
	return c, nil
}
