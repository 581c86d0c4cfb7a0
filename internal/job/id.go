package job

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"hash"
	"regexp"
	"sync"
)

// idEncoding is lower-case, unpadded base32: URL, subject and KV-key safe.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

var (
	scopeIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// ValidScopeID reports whether s may be a tenant or requester id.
func ValidScopeID(s string) bool { return scopeIDPattern.MatchString(s) }

// DeriveID returns the job id for an idempotency key in its scope. It is an
// HMAC under a deployment secret, so ids are stable across retries and
// gateways yet reveal nothing about the key, and two scopes never collide.
func DeriveID(secret []byte, tenant, requester, key string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(tenant))
	m.Write([]byte{0})
	m.Write([]byte(requester))
	m.Write([]byte{0})
	m.Write([]byte(key))
	return "job_" + idEncoding.EncodeToString(m.Sum(nil))[:26]
}

// HashKey returns a short tag for an idempotency key, for a client's own
// logs. It is a plain digest: a guessable key can be recovered from it by
// hashing candidates, so servers tag keys with IDDeriver.KeyHash instead.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// IDDeriver derives job ids under one secret like DeriveID, reusing HMAC
// states across calls (the admission hot path derives one id per request).
type IDDeriver struct {
	pool sync.Pool // of *hmacState
}

// hmacState is one HMAC with its message and sum buffers, pooled together
// so a derivation allocates only the string it returns.
type hmacState struct {
	h   hash.Hash
	msg []byte
	sum [sha256.Size]byte
}

// sum returns the HMAC of tenant, requester and key (NUL-separated), after
// prefix; s is reset first.
func (s *hmacState) sumOf(prefix []byte, tenant, requester, key string) []byte {
	s.h.Reset()
	m := append(s.msg[:0], prefix...)
	m = append(m, tenant...)
	m = append(m, 0)
	m = append(m, requester...)
	m = append(m, 0)
	m = append(m, key...)
	s.h.Write(m)
	s.msg = m
	return s.h.Sum(s.sum[:0])
}

// NewIDDeriver returns a deriver for secret.
func NewIDDeriver(secret []byte) *IDDeriver {
	key := bytes.Clone(secret)
	d := &IDDeriver{}
	d.pool.New = func() any { return &hmacState{h: hmac.New(sha256.New, key), msg: make([]byte, 0, 128)} }
	return d
}

// Derive returns DeriveID(secret, tenant, requester, key).
func (d *IDDeriver) Derive(tenant, requester, key string) string {
	s := d.pool.Get().(*hmacState)
	var enc [52]byte // base32 of 32 bytes, unpadded
	idEncoding.Encode(enc[:], s.sumOf(nil, tenant, requester, key))
	d.pool.Put(s)
	return "job_" + string(enc[:26])
}

// keyHashDomain starts the message of a key hash; a job id's message starts
// with a tenant id, which never holds this byte, so the two never share an
// input.
const keyHashDomain = 0x01

// KeyHash returns the tag of an idempotency key in the server's logs and
// records (key_hash): 8 bytes of an HMAC under the deriver's secret over the
// key in its scope, hex. Without the secret it gives nothing away, even for
// a key that is easy to guess; under one secret it is stable, so log lines
// of one key still line up.
func (d *IDDeriver) KeyHash(tenant, requester, key string) string {
	s := d.pool.Get().(*hmacState)
	var out [16]byte
	hex.Encode(out[:], s.sumOf([]byte{keyHashDomain}, tenant, requester, key)[:8])
	d.pool.Put(s)
	return string(out[:])
}
