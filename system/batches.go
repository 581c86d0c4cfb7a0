package system

import (
	"context"
	"errors"

	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// dispatcherWithBatches is the dispatcher component: the dispatcher, then
// the batch relay, which admits the jobs of a batch whose gateway died
// after its commit (docs/reliability.md, "Batches"). They stop in the
// reverse order.
type dispatcherWithBatches struct {
	d  *dispatcher.Dispatcher
	br *dispatcher.BatchRelay
}

func (s *System) withBatchRelay(d *dispatcher.Dispatcher, res *natsjs.Resources) (Service, error) {
	br, err := dispatcher.NewBatchRelay(dispatcher.BatchRelayConfig{Failpoints: s.fp}, BatchRelayStores(res), s.log.With("service", "batch-relay"))
	if err != nil {
		return nil, err
	}
	return &dispatcherWithBatches{d: d, br: br}, nil
}

func (c *dispatcherWithBatches) Start(ctx context.Context) error {
	if err := c.d.Start(ctx); err != nil {
		return err
	}
	if err := c.br.Start(ctx); err != nil {
		_ = c.d.Stop(context.WithoutCancel(ctx))
		return err
	}
	return nil
}

func (c *dispatcherWithBatches) Stop(ctx context.Context) error {
	return errors.Join(c.br.Stop(ctx), c.d.Stop(ctx))
}
