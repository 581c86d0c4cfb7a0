package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/secretfile"
)

// Identity is who a verified token speaks for.
type Identity struct {
	Tenant    string
	Requester string
	Admin     bool
	// Operator reaches every tenant (the admin API, types, workers); its
	// Tenant may be empty.
	Operator bool
	Expires  time.Time
}

// MaxIssuedAtSkew is how far in the future a token's iat may lie (the
// minting machine's clock ahead of this one's); later, it is refused.
const MaxIssuedAtSkew = 60 * time.Second

// Option says what a deployment's tokens carry beyond the identity: Mint
// writes it into a token, a Verifier requires it of one.
type Option func(*policy)

type policy struct {
	audience, issuer string
}

// WithAudience: tokens name aud (the aud claim, a string or an array holding
// it). Empty: no aud is written, none is checked.
func WithAudience(aud string) Option { return func(p *policy) { p.audience = aud } }

// WithIssuer: tokens name iss (the iss claim). Empty: no iss is written,
// none is checked.
func WithIssuer(iss string) Option { return func(p *policy) { p.issuer = iss } }

func policyOf(opts []Option) policy {
	var p policy
	for _, o := range opts {
		o(&p)
	}
	return p
}

// claims is the payload of a token. The times are whole seconds (seconds
// refuses anything but a JSON integer), unlike jwt.NumericDate, which also
// takes fractions and numbers in strings.
type claims struct {
	Tenant    string           `json:"tenant"`
	Admin     bool             `json:"admin,omitempty"`
	Operator  bool             `json:"operator,omitempty"`
	Subject   string           `json:"sub,omitempty"`
	Issuer    string           `json:"iss,omitempty"`
	Audience  jwt.ClaimStrings `json:"aud,omitempty"`
	ExpiresAt *seconds         `json:"exp,omitempty"`
	NotBefore *seconds         `json:"nbf,omitempty"`
	IssuedAt  *seconds         `json:"iat,omitempty"`
}

// seconds is a NumericDate (RFC 7519) in whole seconds. Decoding takes only
// a JSON number that is an integer: "exp": "1767225600" (a string) and
// "exp": 1767225600.5 are errors, so the token is refused.
type seconds int64

func (s *seconds) UnmarshalJSON(b []byte) error {
	// encoding/json hands over one valid JSON value; of those only an
	// integer number parses.
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("NumericDate must be a JSON integer, got %.20s", b)
	}
	*s = seconds(n)
	return nil
}

func secondsOf(t time.Time) *seconds {
	s := seconds(t.Unix())
	return &s
}

func (s *seconds) date() *jwt.NumericDate {
	if s == nil {
		return nil
	}
	return jwt.NewNumericDate(time.Unix(int64(*s), 0))
}

// The jwt.Claims methods, for the parser's exp, nbf, aud and iss checks.
func (c *claims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt.date(), nil }
func (c *claims) GetNotBefore() (*jwt.NumericDate, error)      { return c.NotBefore.date(), nil }
func (c *claims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.IssuedAt.date(), nil }
func (c *claims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c *claims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c *claims) GetAudience() (jwt.ClaimStrings, error)       { return c.Audience, nil }

// Mint signs a token for id valid for ttl, with the audience and issuer
// opts give.
func Mint(secret []byte, id Identity, ttl time.Duration, now time.Time, opts ...Option) (string, error) {
	if !validTenant(id.Tenant, id.Operator) || !job.ValidScopeID(id.Requester) {
		return "", fmt.Errorf("tenant and subject must match [A-Za-z0-9_-]{1,64} (an operator's tenant may be empty)")
	}
	if ttl <= 0 {
		return "", errors.New("ttl must be positive")
	}
	p := policyOf(opts)
	c := &claims{Tenant: id.Tenant, Admin: id.Admin, Operator: id.Operator, Subject: id.Requester, Issuer: p.issuer,
		IssuedAt: secondsOf(now), ExpiresAt: secondsOf(now.Add(ttl))}
	if p.audience != "" {
		c.Audience = jwt.ClaimStrings{p.audience}
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}

// Verifier checks bearer tokens. Verified tokens are cached until they expire
// so the hot path does not re-run HMAC and JSON for every request of a client.
type Verifier struct {
	secret []byte
	now    func() time.Time
	parser *jwt.Parser
	mu     sync.Mutex
	cache  map[string]*Identity // never modified once stored
}

// NewVerifier returns a verifier for tokens signed with secret, judging
// expiry by now (time.Now when nil). With WithAudience or WithIssuer a token
// must carry that aud or iss.
func NewVerifier(secret []byte, now func() time.Time, opts ...Option) *Verifier {
	if now == nil {
		now = time.Now
	}
	p := policyOf(opts)
	popts := []jwt.ParserOption{jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired(), jwt.WithTimeFunc(now)}
	if p.audience != "" {
		popts = append(popts, jwt.WithAudience(p.audience))
	}
	if p.issuer != "" {
		popts = append(popts, jwt.WithIssuer(p.issuer))
	}
	return &Verifier{secret: secret, now: now, parser: jwt.NewParser(popts...), cache: make(map[string]*Identity)}
}

const maxCached = 10000

// Verify returns the identity of a raw token (without "Bearer "). Any defect
// is job.ErrUnauthorized.
func (v *Verifier) Verify(token string) (Identity, error) {
	id, err := v.VerifyShared(token)
	if err != nil {
		return Identity{}, err
	}
	return *id, nil
}

// VerifyShared is Verify returning the cached identity itself, which the
// caller must not modify: a request can keep it without a copy on the heap.
//
// Besides the signature (HS256 only) a token must have an integer exp that
// has not passed, no nbf still ahead, no iat more than MaxIssuedAtSkew
// ahead, no crit header (RFC 7515 §4.1.11: jobgate understands no
// extension, so any it is told to understand is one it does not), the
// configured aud and iss, and well-formed tenant and sub claims.
func (v *Verifier) VerifyShared(token string) (*Identity, error) {
	now := v.now()
	v.mu.Lock()
	id, ok := v.cache[token]
	v.mu.Unlock()
	if ok {
		if now.Before(id.Expires) {
			return id, nil
		}
		v.mu.Lock()
		delete(v.cache, token)
		v.mu.Unlock()
	}
	var c claims
	_, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok {
			return nil, errors.New("crit header names extensions this verifier does not understand")
		}
		return v.secret, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", job.ErrUnauthorized, err)
	}
	if c.IssuedAt != nil && time.Unix(int64(*c.IssuedAt), 0).After(now.Add(MaxIssuedAtSkew)) {
		return nil, fmt.Errorf("%w: iat is in the future", job.ErrUnauthorized)
	}
	if !validTenant(c.Tenant, c.Operator) || !job.ValidScopeID(c.Subject) {
		return nil, fmt.Errorf("%w: tenant or sub claim malformed", job.ErrUnauthorized)
	}
	id = &Identity{Tenant: c.Tenant, Requester: c.Subject, Admin: c.Admin, Operator: c.Operator, Expires: time.Unix(int64(*c.ExpiresAt), 0)}
	v.mu.Lock()
	if len(v.cache) >= maxCached {
		clear(v.cache) // bounded; a cold miss only costs one verification
	}
	// Clone: callers may pass a string aliasing a reused request buffer
	// (fasthttp), which must never become a map key.
	v.cache[strings.Clone(token)] = id
	v.mu.Unlock()
	return id, nil
}

// validTenant: a tenant id, or none for an operator.
func validTenant(tenant string, operator bool) bool {
	return job.ValidScopeID(tenant) || (operator && tenant == "")
}

// SecretFile is where a single-box deployment keeps its generated secret.
func SecretFile(dataDir string) string { return filepath.Join(dataDir, "auth.secret") }

// LoadSecret returns the configured secret, or the one in dataDir. With
// create, a missing file is generated (0600); without, it is an error that
// says how to get one.
func LoadSecret(configured, dataDir string, create bool) ([]byte, error) {
	if configured != "" {
		return []byte(configured), nil
	}
	path := SecretFile(dataDir)
	if create {
		s, err := secretfile.ReadOrCreate(path)
		if err != nil {
			return nil, fmt.Errorf("auth secret: %w", err)
		}
		return s, nil
	}
	s, err := secretfile.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no auth secret: set JOBGATE_AUTH_SECRET or run `jobgate serve` once with this data dir (%s): %w", dataDir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("auth secret: %w", err)
	}
	return s, nil
}
