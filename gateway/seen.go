package gateway

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/maphash"
	"sync"

	"github.com/jobgate/jobgate/internal/recent"
)

// seenKeys remembers which job records this gateway has seen exist, so a
// replay reads first (one read, no write) while a new key goes straight to
// the create-only commit. It is only a hint: a miss costs one rejected
// create, and a false hit (two keys with one 64-bit hash) one read that
// finds nothing before the create. Keys are kept as their hashes, 8 bytes
// each instead of the ~60-byte store key (docs/performance.md, memory).
//
// With each key it keeps the bodyProof of the last body this gateway
// admitted or replayed under it, so that a byte-identical retry can skip
// decoding, validating and canonicalizing the body (see bodyProof).
type seenKeys struct {
	seed maphash.Seed
	keys *recent.Map[uint64, bodyProof]
}

func newSeenKeys(max int) *seenKeys {
	return &seenKeys{seed: maphash.MakeSeed(), keys: recent.New[uint64, bodyProof](max)}
}

func (s *seenKeys) has(k string) bool {
	_, ok := s.lookup(k)
	return ok
}

// lookup returns the proof kept with k (zero when none is) and whether k
// was seen at all.
func (s *seenKeys) lookup(k string) (bodyProof, bool) {
	return s.keys.Get(maphash.String(s.seed, k))
}

// add records k with the proof of its body (zero: seen, nothing proven);
// memory stays bounded at 2×max entries (recent.Map).
func (s *seenKeys) add(k string, p bodyProof) {
	s.keys.Put(maphash.String(s.seed, k), p)
}

// mark records k as seen, keeping a proof it already has.
func (s *seenKeys) mark(k string) {
	s.keys.Keep(maphash.String(s.seed, k), bodyProof{})
}

// bodyProof says that a raw submission body, decoded under the declared
// types of one generation, has a given fingerprint: the first 16 bytes of
// SHA-256 over the generation, the fingerprint and the body. It is checked
// against the fingerprint of the record read for the key, so a replay whose
// body is byte-identical to one already decoded answers from that read
// alone, and the result is the one the full decode would give: the decode
// depends only on the body and the schemas, and any change of a schema
// changes the generation. A body that differs in any byte (another
// payload, or the same params formatted otherwise) does not match and takes
// the full path, which answers 409 or 200 by the canonical fingerprint.
// Collisions would need a SHA-256 collision (2^64 work for 128 bits).
type bodyProof [16]byte

func makeProof(gen uint64, fingerprint string, body []byte) bodyProof {
	buf := proofBufs.Get().(*[]byte)
	b := binary.BigEndian.AppendUint64((*buf)[:0], gen)
	b = append(b, fingerprint...)
	b = append(b, 0)
	b = append(b, body...)
	sum := sha256.Sum256(b)
	if cap(b) <= 8<<10 { // a rare large body is not kept
		*buf = b
		proofBufs.Put(buf)
	}
	return bodyProof(sum[:16])
}

// proofBufs keeps makeProof from allocating per request.
var proofBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}
