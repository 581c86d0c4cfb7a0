package gateway

import (
	"hash/maphash"
	"sync"
)

// seenKeys remembers which job records this gateway has seen exist, so a
// replay reads first (one read, no write) while a new key goes straight to
// the create-only commit. It is only a hint: a miss costs one rejected
// create, and a false hit (two keys with one 64-bit hash) one read that
// finds nothing before the create. Keys are kept as their hashes, 8 bytes
// each instead of the ~60-byte store key (docs/performance.md, memory).
type seenKeys struct {
	mu   sync.Mutex
	max  int
	seed maphash.Seed
	cur  map[uint64]struct{}
	prev map[uint64]struct{}
}

func newSeenKeys(max int) *seenKeys {
	return &seenKeys{max: max, seed: maphash.MakeSeed(), cur: make(map[uint64]struct{}), prev: map[uint64]struct{}{}}
}

func (s *seenKeys) has(k string) bool {
	h := maphash.String(s.seed, k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[h]; ok {
		return true
	}
	_, ok := s.prev[h]
	return ok
}

// add records k; two generations keep memory bounded at 2×max entries.
func (s *seenKeys) add(k string) {
	h := maphash.String(s.seed, k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cur) >= s.max {
		s.prev, s.cur = s.cur, make(map[uint64]struct{}, s.max)
	}
	s.cur[h] = struct{}{}
}
