package recent

import "sync"

// Map is a bounded map of recent entries, safe for concurrent use.
type Map[K comparable, V any] struct {
	mu        sync.Mutex
	max       int
	cur, prev map[K]V
}

// New returns a map that keeps at most 2×max entries.
func New[K comparable, V any](max int) *Map[K, V] {
	return &Map[K, V]{max: max, cur: make(map[K]V), prev: make(map[K]V)}
}

// Get returns the value kept for k.
func (m *Map[K, V]) Get(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.cur[k]; ok {
		return v, true
	}
	v, ok := m.prev[k]
	return v, ok
}

// Put keeps v for k in the current generation.
func (m *Map[K, V]) Put(k K, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(k, v)
}

// Keep keeps k in the current generation with the value it has, or v when
// it has none.
func (m *Map[K, V]) Keep(k K, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.cur[k]; ok {
		return
	}
	if old, ok := m.prev[k]; ok {
		v = old
	}
	m.putLocked(k, v)
}

// Len is the number of entries kept.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cur) + len(m.prev)
}

func (m *Map[K, V]) putLocked(k K, v V) {
	if _, ok := m.cur[k]; !ok && len(m.cur) >= m.max {
		m.prev, m.cur = m.cur, make(map[K]V, m.max)
	}
	m.cur[k] = v
}
