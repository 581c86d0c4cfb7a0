package natsjs

import "sync"

// recentSet remembers up to about 2×limit keys, forgetting the oldest half
// at a time (two generations): a cheap bounded "seen lately" for hot paths
// where a miss only costs a store read.
type recentSet struct {
	mu       sync.Mutex
	limit    int
	cur, old map[string]struct{}
}

func newRecentSet(limit int) *recentSet {
	return &recentSet{limit: limit, cur: make(map[string]struct{}), old: make(map[string]struct{})}
}

func (s *recentSet) has(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[k]; ok {
		return true
	}
	_, ok := s.old[k]
	return ok
}

func (s *recentSet) add(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cur) >= s.limit {
		s.old, s.cur = s.cur, make(map[string]struct{}, s.limit)
	}
	s.cur[k] = struct{}{}
}
