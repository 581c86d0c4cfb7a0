package gateway

import "sync"

// seenKeys remembers which job records this gateway has seen exist, so a
// replay reads first (one read, no write) while a new key goes straight to
// the create-only commit. It is only a hint: a miss costs one rejected create.
type seenKeys struct {
	mu   sync.Mutex
	max  int
	cur  map[string]struct{}
	prev map[string]struct{}
}

func newSeenKeys(max int) *seenKeys {
	return &seenKeys{max: max, cur: make(map[string]struct{}), prev: map[string]struct{}{}}
}

func (s *seenKeys) has(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[k]; ok {
		return true
	}
	_, ok := s.prev[k]
	return ok
}

// add records k; two generations keep memory bounded at 2×max entries.
func (s *seenKeys) add(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cur) >= s.max {
		s.prev, s.cur = s.cur, make(map[string]struct{}, s.max)
	}
	s.cur[k] = struct{}{}
}
