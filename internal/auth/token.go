package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jobgate/jobgate/internal/secretfile"
	"github.com/jobgate/jobgate/pkg/job"
)

// Identity is who a verified token speaks for.
type Identity struct {
	Tenant    string
	Requester string
	Admin     bool
	Expires   time.Time
}

type claims struct {
	Tenant string `json:"tenant"`
	Admin  bool   `json:"admin,omitempty"`
	jwt.RegisteredClaims
}

// Mint signs a token for id valid for ttl.
func Mint(secret []byte, id Identity, ttl time.Duration, now time.Time) (string, error) {
	if !job.ValidScopeID(id.Tenant) || !job.ValidScopeID(id.Requester) {
		return "", fmt.Errorf("tenant and subject must match [A-Za-z0-9_-]{1,64}")
	}
	if ttl <= 0 {
		return "", errors.New("ttl must be positive")
	}
	c := claims{Tenant: id.Tenant, Admin: id.Admin, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   id.Requester,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}

// Verifier checks bearer tokens. Verified tokens are cached until they expire
// so the hot path does not re-run HMAC and JSON for every request of a client.
type Verifier struct {
	secret []byte
	now    func() time.Time
	mu     sync.Mutex
	cache  map[string]*Identity // never modified once stored
}

// NewVerifier returns a verifier for tokens signed with secret, judging
// expiry by now (time.Now when nil).
func NewVerifier(secret []byte, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{secret: secret, now: now, cache: make(map[string]*Identity)}
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
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return v.secret, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired(), jwt.WithTimeFunc(v.now))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", job.ErrUnauthorized, err)
	}
	if !job.ValidScopeID(c.Tenant) || !job.ValidScopeID(c.Subject) {
		return nil, fmt.Errorf("%w: tenant or sub claim malformed", job.ErrUnauthorized)
	}
	id = &Identity{Tenant: c.Tenant, Requester: c.Subject, Admin: c.Admin, Expires: c.ExpiresAt.Time}
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
