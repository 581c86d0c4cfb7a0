package dispatcher

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
)

// laneDepth is how many changes wait in one lane of a follower before the
// puller waits for that lane: with the consumer's own batch it bounds the
// changes a dispatcher holds unhandled.
const laneDepth = 32

// follow hands every change of a change-log consumer to handle, from
// Config.FollowLanes goroutines ("lanes") of the dispatcher, fed by one
// puller. Each change goes to the lane its key hashes to, so the changes
// of one key are handled one at a time and in log order, while changes of
// other keys do not wait behind them: the handlers are a few store round
// trips each, and one loop over every tenant's changes capped the whole
// pipeline at one job per round trip. A failed pull is retried after a
// second, one gone silent at once; the lanes end when the consumer is
// stopped, after the changes in hand. handle gets d.force, not ctx: a
// change in hand is handled to its end unless a Stop runs out of time.
func (d *Dispatcher) follow(ctx context.Context, name string, changes *natsjs.ChangeLog, key func(subject string) string, handle func(context.Context, *natsjs.LoggedChange)) {
	lanes := make([]chan *natsjs.LoggedChange, d.cfg.FollowLanes)
	for i := range lanes {
		lane := make(chan *natsjs.LoggedChange, laneDepth)
		lanes[i] = lane
		d.spawn(func() {
			for c := range lane {
				handle(d.force, c)
			}
		})
	}
	seed := maphash.MakeSeed()
	d.spawn(func() {
		defer func() {
			for _, lane := range lanes {
				close(lane)
			}
		}()
		for {
			c, err := changes.Next()
			if err != nil {
				if errors.Is(err, natsjs.ErrFeedStopped) {
					return
				}
				pullFailed(ctx, d.log, name, changes, err)
				continue
			}
			lanes[maphash.String(seed, key(c.Subject()))%uint64(len(lanes))] <- c
		}
	})
}

// pullFailed logs a failed pull of a change log with where its consumer
// stood, and waits before the next: not at all after a silent pull (the
// iterator asks the server again, and every change waits on it), else a
// second, or until ctx ends.
func pullFailed(ctx context.Context, log *slog.Logger, name string, changes *natsjs.ChangeLog, err error) {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	log.Warn(name+" pull failed", append([]any{"err", err}, changes.State(sctx)...)...)
	cancel()
	if errors.Is(err, natsjs.ErrPullSilent) {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
}
