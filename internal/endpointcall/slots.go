package endpointcall

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
)

// An endpoint's concurrency holds across the deployment: a runner's slot
// asks for a job only while it holds one of the type's leased slots
// (natsjs.SlotStore: at most concurrency of them exist, whatever the
// number of dispatchers), renewed while it is held, given back when the
// slot has no job. A dispatcher that dies stops renewing: its slots come
// back within natsjs.SlotTTL.

// slotLeaser is what the caller needs of the slot store.
type slotLeaser interface {
	Acquire(ctx context.Context, typ string, limit int, holder string) (natsjs.Slot, error)
	Renew(ctx context.Context, slot natsjs.Slot, holder string) (natsjs.Slot, error)
	Release(ctx context.Context, slot natsjs.Slot) error
	TakeRate(ctx context.Context, typ string, window int64, want, limit int) (int, error)
}

// leases holds the slots this caller took and renews them.
type leases struct {
	store  slotLeaser
	holder string
	every  time.Duration
	log    interface {
		Warn(msg string, args ...any)
	}

	mu   sync.Mutex
	held map[*natsjs.Slot]struct{}
}

// run renews every slot held each every until ctx ends.
func (l *leases) run(ctx context.Context) {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		held := make([]*natsjs.Slot, 0, len(l.held))
		for s := range l.held {
			held = append(held, s)
		}
		l.mu.Unlock()
		for _, s := range held {
			rctx, cancel := context.WithTimeout(ctx, l.every)
			l.mu.Lock()
			cur := *s
			l.mu.Unlock()
			next, err := l.store.Renew(rctx, cur, l.holder)
			cancel()
			l.mu.Lock()
			if _, still := l.held[s]; still && err == nil {
				*s = next
			}
			l.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				l.log.Warn("endpoint slot not renewed: its request goes on, and the slot may be taken meanwhile", "slot", cur.Key, "err", err)
			}
		}
	}
}

// gate is a runner's workerhook.Gate: it waits, within ctx, for a free
// slot of typ among the first limit() ones. Only one slot of the runner
// looks at a time (waiting), so a saturated type costs each dispatcher a
// few store reads a second, not one per idle slot.
func (l *leases) gate(typ string, limit func() int, waiting *sync.Mutex) func(ctx context.Context) (func(), error) {
	return func(ctx context.Context) (func(), error) {
		waiting.Lock()
		defer waiting.Unlock()
		wait := 50 * time.Millisecond
		for {
			slot, err := l.store.Acquire(ctx, typ, limit(), l.holder)
			if err == nil {
				s := &slot
				l.mu.Lock()
				l.held[s] = struct{}{}
				l.mu.Unlock()
				return func() { l.release(s) }, nil
			}
			if !errors.Is(err, natsjs.ErrNoSlot) {
				return nil, err
			}
			t := time.NewTimer(wait/2 + rand.N(wait))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			wait = min(2*wait, time.Second)
		}
	}
}

func (l *leases) release(s *natsjs.Slot) {
	l.mu.Lock()
	delete(l.held, s)
	cur := *s
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.store.Release(ctx, cur); err != nil {
		l.log.Warn("endpoint slot not given back: it comes back when its lease runs out", "slot", cur.Key, "err", err)
	}
}
