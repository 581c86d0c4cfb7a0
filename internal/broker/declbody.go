package broker

import (
	"crypto/sha256"

	"github.com/jobgate/jobgate/internal/schemapool"
)

// declBody is the last declaration of a type its credential sent that
// was stored or found identical to the stored one: the hash of its
// request's bytes, and its key. A worker declares its types again in the
// same bytes at every start; such a repeat is answered without decoding
// it (repeated), and it passes the credential's empty bucket.
type declBody struct {
	sum [sha256.Size]byte
	key schemapool.Key
}

func bodyKey(r *request) string { return r.cred + "\x00" + r.typ }

// rememberBody notes the request as its type's last declaration.
func (b *Broker) rememberBody(r *request, sum [sha256.Size]byte, key schemapool.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.bodies) >= maxCredentials {
		clear(b.bodies)
	}
	b.bodies[bodyKey(r)] = declBody{sum: sum, key: key}
}

// repeated reports whether the request is in the bytes of its type's last
// declaration (known), and whether that declaration is still the stored
// one by the declaration this broker read at most declTTL ago (repeat):
// the request then changes nothing. A version another broker stored
// within declTTL may be missed: the repeat is then answered as if it had
// come just before that version.
func (b *Broker) repeated(r *request, sum [sha256.Size]byte) (repeat, known bool) {
	b.mu.Lock()
	e, ok := b.bodies[bodyKey(r)]
	c, hit := b.decls[r.typ]
	b.mu.Unlock()
	if !ok || e.sum != sum {
		return false, false
	}
	if !hit || b.cfg.Now().Sub(c.at) > declTTL || c.d.Owner != r.cred {
		return false, true
	}
	return schemapool.DeclKey(c.d) == e.key, true
}
