package renderer

import (
	"context"
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/pkg/api"
	"time"

	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
)

// Config tunes a renderer. Zero fields take the documented defaults.
type Config struct {
	// Worker names this process in the records it claims. Default
	// host-pid-random.
	Worker string
	// Concurrency is how many reports this process renders at once.
	// Default 2.
	Concurrency int
	// MaxAttempts is how many attempts a permit report gets (declared with
	// the type). Default 3.
	MaxAttempts int
	// RenderTimeout is the time budget of one attempt (declared with the
	// type, in whole seconds: a fraction is rounded up). Default 2m.
	RenderTimeout time.Duration
	// MaxPages is the page budget; a larger job fails budget_exceeded.
	// Default 2000.
	MaxPages int
	// MaxOutputBytes is the size limit of one report (declared with the
	// type); a larger one fails budget_exceeded. Default 64 MiB.
	MaxOutputBytes int64
	// HeartbeatInterval, PullWait and DrainTimeout are the worker
	// package's (see worker.Config); zero takes its defaults. How render
	// slots are shared between tenants is the dispatcher's (its broker's)
	// to decide.
	HeartbeatInterval time.Duration
	PullWait          time.Duration
	DrainTimeout      time.Duration
	// Failpoints injects faults (renderer.mid-render). Nil is off.
	Failpoints *failpoint.Set
	// OnRender, if set, is called when an attempt starts rendering, with
	// the attempt's context and the job's id, scope and attempt (tests
	// count renders with it, or hold a render until its context ends).
	OnRender func(ctx context.Context, r *job.Record)
	// Metrics records render attempts and durations; nil records nothing.
	Metrics *metrics.Metrics
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Concurrency == 0 {
		c.Concurrency = api.DefaultConcurrency
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = api.DefaultAttempts
	}
	if c.RenderTimeout == 0 {
		c.RenderTimeout = api.DefaultTimeout
	}
	if c.MaxPages == 0 {
		c.MaxPages = 2000
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = api.DefaultMaxResultBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency must be at least 1, got %d", c.Concurrency))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts must be at least 1, got %d", c.MaxAttempts))
	}
	if c.RenderTimeout <= 0 {
		errs = append(errs, fmt.Errorf("render timeout must be positive, got %s", c.RenderTimeout))
	}
	if c.MaxPages < 1 || c.MaxOutputBytes < 1 {
		errs = append(errs, errors.New("page and output budgets must be positive"))
	}
	return errors.Join(errs...)
}
