package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// storageSource reports the byte budgets' use (natsjs.Resources).
type storageSource interface {
	StorageUse(ctx context.Context) ([]natsjs.StorageUse, error)
}

// admitBelow is the share of any byte budget past which admission answers
// 507 storage-full: the rest is left to the jobs already admitted, whose
// state changes, events, notices and results must still fit. At the budget
// itself JetStream refuses the write (discard new), so nothing stored is
// ever dropped for room.
const admitBelow = 0.9

// storageRecheck is how long one reading of the budgets is trusted: the
// stream infos are read at most this often, on the admission path.
const storageRecheck = 2 * time.Second

// storageGate tells admission whether the budgets leave room for a job.
type storageGate struct {
	src     storageSource // nil: no budgets to check
	metrics *metrics.Metrics
	now     func() time.Time

	mu      sync.Mutex // held by the one reading the budgets
	checked time.Time
	full    error // job.ErrStorageFull naming the resource, or nil
}

// room returns nil when a new job fits, else an error wrapping
// job.ErrStorageFull. When the budgets cannot be read it lets the job in:
// the write itself then says whether the store is full or unavailable.
func (s *storageGate) room(ctx context.Context) error {
	if s == nil || s.src == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); now.Sub(s.checked) >= storageRecheck {
		use, err := s.src.StorageUse(ctx)
		if err != nil {
			return nil
		}
		s.checked, s.full = now, nil
		for _, u := range use {
			s.metrics.SetStorage(u.Resource, u.Bytes, u.MaxBytes)
			if u.MaxBytes > 0 && float64(u.Bytes) >= admitBelow*float64(u.MaxBytes) && s.full == nil {
				s.full = fmt.Errorf("%w: %s holds %d of its %d bytes", job.ErrStorageFull, u.Resource, u.Bytes, u.MaxBytes)
			}
		}
	}
	return s.full
}
