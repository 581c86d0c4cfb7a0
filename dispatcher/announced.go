package dispatcher

import "sync"

// announced remembers, per job, the newest record revision whose event
// this process's broker stored (or found stored): the relay's check of a
// terminal change (is its event there?) needs no read of the event stream
// when the broker in the same dispatcher announced that change itself,
// which with one dispatcher is every change a worker's verdict made. A
// change another process wrote, or one this broker could not announce, is
// checked as before.
type announced struct {
	mu    sync.Mutex
	rev   map[string]uint64
	order []string // keys, oldest first: at most maxAnnounced kept
}

const maxAnnounced = 1 << 16

func newAnnounced() *announced { return &announced{rev: map[string]uint64{}} }

// note records that the event of key's change at revision is stored.
func (a *announced) note(key string, revision uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.rev[key]; ok {
		a.rev[key] = max(old, revision)
		return
	}
	if len(a.order) >= maxAnnounced {
		delete(a.rev, a.order[0])
		a.order = a.order[1:]
	}
	a.rev[key] = revision
	a.order = append(a.order, key)
}

// has reports whether the event of key's change at revision, or of a later
// one, is known stored.
func (a *announced) has(key string, revision uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.rev[key]
	return ok && r >= revision
}
