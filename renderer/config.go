package renderer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/pkg/job"
)

// Config tunes a renderer. Zero fields take the documented defaults.
type Config struct {
	// Worker names this process in the records it claims (the worker
	// field). Default: host-pid-random.
	Worker string
	// Concurrency is how many renders this process runs at once. Default 2.
	Concurrency int
	// MaxAttempts is how many attempts a job gets; it is also MaxDeliver of
	// the shared work consumer. Default 3.
	MaxAttempts int
	// RenderTimeout is the time budget of one attempt. Default 2m.
	RenderTimeout time.Duration
	// MaxPages is the page budget; a larger job fails budget_exceeded.
	// Default 2000.
	MaxPages int
	// MaxOutputBytes is the size budget of one result file; a larger one
	// fails budget_exceeded. Default 64 MiB.
	MaxOutputBytes int64
	// AckWait is how long a delivery may go without a sign of life before
	// the queue hands it to another renderer. Default 30s.
	AckWait time.Duration
	// HeartbeatInterval is the longest time between two writes of the job
	// record while rendering (checkpoints count). Default 5s.
	HeartbeatInterval time.Duration
	// StaleAfter: when the work message of a running job comes back and the
	// job's heartbeat is older than this, its worker is taken to be gone
	// and the job is claimed anew. Must be at least twice
	// HeartbeatInterval and below AckWait. Default 15s.
	StaleAfter time.Duration
	// CheckpointPercent: progress is written every this many percent of
	// the pages, not per page. Default 10.
	CheckpointPercent int
	// PullWait is how long one pull for work waits. Default 5s.
	PullWait time.Duration
	// DrainTimeout is how long Stop lets running renders finish before it
	// interrupts them at their next checkpoint and returns their work to
	// the queue. Default 10s.
	DrainTimeout time.Duration
	// Failpoints injects faults (renderer.mid-render). Nil is off.
	Failpoints *failpoint.Set
	// OnRender, if set, is called when an attempt starts rendering, with the
	// claimed record (tests count renders with it).
	OnRender func(r *job.Record)
	// Metrics records render attempts and durations; nil records nothing.
	Metrics *metrics.Metrics
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Worker == "" {
		c.Worker = defaultWorker()
	}
	if c.Concurrency == 0 {
		c.Concurrency = 2
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 3
	}
	if c.RenderTimeout == 0 {
		c.RenderTimeout = 2 * time.Minute
	}
	if c.MaxPages == 0 {
		c.MaxPages = 2000
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = 64 << 20
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = 3 * c.HeartbeatInterval
	}
	if c.CheckpointPercent == 0 {
		c.CheckpointPercent = 10
	}
	if c.PullWait == 0 {
		c.PullWait = 5 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
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
	if c.RenderTimeout <= 0 || c.AckWait <= 0 || c.HeartbeatInterval <= 0 || c.PullWait <= 0 || c.DrainTimeout <= 0 {
		errs = append(errs, errors.New("render timeout, ack wait, heartbeat interval, pull wait and drain timeout must be positive"))
	}
	if c.MaxPages < 1 || c.MaxOutputBytes < 1 {
		errs = append(errs, errors.New("page and output budgets must be positive"))
	}
	if c.StaleAfter < 2*c.HeartbeatInterval || c.StaleAfter >= c.AckWait {
		errs = append(errs, fmt.Errorf("stale after (%s) must be at least twice the heartbeat interval (%s) and below ack wait (%s)",
			c.StaleAfter, c.HeartbeatInterval, c.AckWait))
	}
	if c.CheckpointPercent < 1 || c.CheckpointPercent > 100 {
		errs = append(errs, fmt.Errorf("checkpoint percent must be 1 to 100, got %d", c.CheckpointPercent))
	}
	return errors.Join(errs...)
}

func defaultWorker() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "renderer"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
