package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/required"
	"github.com/jobgate/jobgate/internal/startstop"
)

// batchStore is what the batch relay needs of the batch records
// (natsjs.BatchStore).
type batchStore interface {
	Get(ctx context.Context, key string) (*job.BatchRecord, error)
	MarkAdmitted(ctx context.Context, b *job.BatchRecord, now time.Time) error
	ConsumeChanges(ctx context.Context, batch int) (*natsjs.ChangeLog, error)
}

// BatchRelayStores are the adapters a batch relay works on, both required
// (NewBatchRelay names a missing one). system maps the
// provisioned resources to them.
type BatchRelayStores struct {
	Batches batchStore       // batch records and their change log, which the relay follows (natsjs.BatchStore)
	Items   natsjs.ItemStore // the job records it creates the items in (natsjs.Store)
}

// BatchRelayConfig tunes a batch relay.
type BatchRelayConfig struct {
	// Grace is how long after a batch's commit the relay leaves its items
	// to the gateway that committed it, which creates them before it
	// answers. Default 2s.
	Grace time.Duration
	// Lanes is how many batches are admitted at once. Default 2.
	Lanes int
	// Failpoints injects faults (dispatcher.batch-mid-items). Nil is off.
	Failpoints *failpoint.Set
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// BatchRelay follows the batch record change log (a durable consumer
// shared by every dispatcher) and admits the items of every batch that is
// not marked admitted yet: each item's job record is created create-only
// under its id derived from the batch and the index
// (natsjs.AdmitItems), so a run after a crash, or two at once, create
// nothing twice. The relay proper (relay.go) then announces each new job
// and publishes its work, as for any admission. A change is acknowledged
// only once every item exists; until then it is delivered again.
type BatchRelay struct {
	cfg     BatchRelayConfig
	batches batchStore
	items   natsjs.ItemStore
	log     *slog.Logger

	life  startstop.Lifecycle
	feed  *natsjs.ChangeLog
	force context.Context
	kill  context.CancelFunc
	wg    sync.WaitGroup
}

// NewBatchRelay builds a batch relay on st, both fields of which are
// required.
func NewBatchRelay(cfg BatchRelayConfig, st BatchRelayStores, log *slog.Logger) (*BatchRelay, error) {
	if err := required.Fields(st); err != nil {
		return nil, fmt.Errorf("batch relay: %w", err)
	}
	if cfg.Grace == 0 {
		cfg.Grace = eventGrace
	}
	if cfg.Lanes <= 0 {
		cfg.Lanes = 2
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &BatchRelay{cfg: cfg, batches: st.Batches, items: st.Items, log: log}, nil
}

// Start binds the consumer (tried again within natsjs.StartBound) and
// starts following.
func (r *BatchRelay) Start(ctx context.Context) error {
	if err := r.life.Start(ctx, r.start, r.stop); err != nil {
		return fmt.Errorf("batch relay: %w", err)
	}
	return nil
}

func (r *BatchRelay) start(startCtx, runCtx context.Context) error {
	sctx, cancel := context.WithTimeout(startCtx, natsjs.StartBound)
	defer cancel()
	err := natsjs.UntilAvailable(sctx, natsjs.StartTry, func(ctx context.Context) (err error) {
		r.feed, err = r.batches.ConsumeChanges(ctx, r.cfg.Lanes)
		return err
	})
	if err != nil {
		return err
	}
	r.force, r.kill = context.WithCancel(context.WithoutCancel(runCtx))
	lane := make(chan *natsjs.LoggedChange)
	for range r.cfg.Lanes {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for c := range lane {
				r.handle(r.force, c)
			}
		}()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(lane)
		for {
			c, err := r.feed.Next()
			if errors.Is(err, natsjs.ErrFeedStopped) {
				return
			}
			if err != nil {
				pullFailed(runCtx, r.log, "batch relay", r.feed, err)
				continue
			}
			lane <- c
		}
	}()
	return nil
}

// Stop stops pulling and waits, within ctx, for the batches in hand.
func (r *BatchRelay) Stop(ctx context.Context) error {
	if err := r.life.Stop(ctx); err != nil {
		return fmt.Errorf("batch relay: %w", err)
	}
	return nil
}

func (r *BatchRelay) stop(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.feed.Stop()
		r.wg.Wait()
	}()
	err := startstop.Wait(ctx, done, r.kill)
	r.kill()
	return err
}

// handle admits the items of one batch change, unless it is marked
// admitted.
func (r *BatchRelay) handle(ctx context.Context, c *natsjs.LoggedChange) {
	if c.Deleted() {
		_ = c.Ack()
		return
	}
	key := natsjs.BatchChangeKey(c.Subject())
	if age := r.cfg.Now().Sub(c.Stored()); age < r.cfg.Grace {
		_ = c.Nak(r.cfg.Grace - age) // the committing gateway is at it
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	b, err := r.batches.Get(ctx, key) // as it is now: a later change may have marked it
	if errors.Is(err, job.ErrNotFound) {
		_ = c.Ack() // expired
		return
	}
	if err != nil {
		r.log.Warn("batch relay: batch not readable, will retry", "subject", c.Subject(), "err", err)
		_ = c.Nak(relayRetry)
		return
	}
	if b.AdmittedAt != nil {
		_ = c.Ack()
		return
	}
	half := len(b.Items) / 2
	created, err := natsjs.AdmitItems(ctx, r.items, b, func(done int) {
		if done == half {
			_ = r.cfg.Failpoints.Hit(failpoint.DispatcherBatchMidItems)
		}
	})
	if err == nil {
		err = r.batches.MarkAdmitted(ctx, b, r.cfg.Now())
	}
	if err != nil {
		r.log.Warn("batch relay: items not all admitted, will retry", "batch_id", b.ID, "created", created, "err", err)
		_ = c.Nak(relayRetry)
		return
	}
	if created > 0 {
		r.log.Info("batch relay: admitted the jobs its gateway left out", "batch_id", b.ID, "tenant", b.Tenant, "created", created, "jobs", len(b.Items))
	}
	_ = c.Ack()
}
