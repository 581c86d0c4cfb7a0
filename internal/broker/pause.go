package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
)

// An operator pauses a type on its stored declaration (job.TypeDecl.Paused,
// natsjs.TypeStore.SetPaused); every broker watches the declarations, so
// that its schedulers hand out no work of a paused type within moments of
// the pause, and wake their waiting requests the moment it is resumed. A
// paused type's jobs are admitted and wait queued; a job already running
// goes on and ends as it would (its beats, upload and verdict are not the
// scheduler's). Retries that fall due and take-overs of silent claims wait
// for the resume too: both start an attempt. Should the watch lag or break,
// a request still reads the declaration again every declTTL (decl), so a
// pause holds within declTTL plus idleWake, and a resume within declTTL
// plus pausedWake, all the same.

// typeWatch is a broker's watch of the declarations: started with its first
// scheduler, it runs until the broker stops (b.ctx).
type typeWatch struct {
	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc // ends the watch (b.ctx ends it too)
}

// watchTypes starts the broker's watch of the declarations, once, and
// returns when it has delivered every current one (within ctx). Called
// with b.schedMu held, before a scheduler starts.
func (b *Broker) watchTypes(ctx context.Context) error {
	b.types.mu.Lock()
	defer b.types.mu.Unlock()
	if b.types.started {
		return nil
	}
	caught := make(chan struct{})
	var once sync.Once
	wctx, cancel := context.WithCancel(b.ctx)
	err := b.stores.Types.WatchTypes(wctx, func(c *natsjs.TypeChange) {
		switch {
		case c == nil:
			once.Do(func() { close(caught) })
		case c.Decl != nil:
			b.declChanged(c.Decl.Name, c.Decl)
		default:
			b.declChanged(c.Removed, nil)
		}
	})
	if err != nil {
		cancel()
		return fmt.Errorf("watch the declared types: %w", err)
	}
	select {
	case <-caught:
	case <-ctx.Done():
		cancel()
		return fmt.Errorf("watch the declared types: %w", ctx.Err())
	}
	b.types.started, b.types.cancel = true, cancel
	return nil
}

// declChanged takes a declaration (nil: the type was removed) from the
// watch: it replaces the cached one, and the type's waiting requests look
// again (a resumed type's work starts at once).
func (b *Broker) declChanged(name string, d *job.TypeDecl) {
	b.mu.Lock()
	if d != nil {
		b.decls[name] = cachedDecl{d: d, at: b.cfg.Now()}
	} else {
		delete(b.decls, name)
	}
	s := b.scheds[name]
	b.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		s.wakeLocked()
		s.mu.Unlock()
	}
}

// current is the type's declaration as a waiting request goes on with:
// read again (at most every declTTL, see decl), or prev when the store
// could not be read. A reply ends the request: the type is gone, or
// another credential's now.
func (b *Broker) current(ctx context.Context, cred, typ string, prev *job.TypeDecl) (*job.TypeDecl, *wire.Reply) {
	d, bad := b.decl(ctx, cred, typ)
	if bad != nil && bad.Error != nil && bad.Error.Code == wire.CodeUnavailable {
		return prev, nil
	}
	return d, bad
}

// pausedWake bounds how long a request of a paused type sleeps without
// news: the watch wakes it on the resume, this only when the watch lags.
const pausedWake = 3 * time.Second

// idle holds a request of a paused type until news (a change of the
// declaration wakes it), pausedWake or ctx's end: deferred work that falls
// due meanwhile does not wake it, as it waits for the resume.
func (s *sched) idle(ctx context.Context) {
	s.mu.Lock()
	wake := s.wake
	s.mu.Unlock()
	timer := time.NewTimer(pausedWake)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-timer.C:
	}
}
