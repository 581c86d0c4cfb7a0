package dispatcher

import (
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/pkg/api"
	"time"

	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
)

// Config tunes a dispatcher. Zero fields take the documented defaults.
type Config struct {
	// MaxAttempts is how many attempts a job gets when its record carries
	// no limit of its own (records admitted before job types). Default 3.
	MaxAttempts int
	// RenderTimeout is the budget of one attempt when its record carries
	// none. Default 2m.
	RenderTimeout time.Duration
	// Grace is added to a job's attempt budget before a running job whose
	// worker stopped writing heartbeats is recovered. Default 30s.
	Grace time.Duration
	// SweepInterval is how often the in-memory running jobs are checked.
	// Default 5s.
	SweepInterval time.Duration
	// QueuedCheckAfter: a job still queued this long after its last change
	// has its work message looked up (once per period): a lost one is
	// published again. It should exceed the
	// work queue's de-duplication window. Default 15m.
	QueuedCheckAfter time.Duration
	// JobTTL is the job records' retention; zero takes the record
	// store's (the deployment's JOBGATE_JOB_TTL). A job still open
	// ExpireMargin before CreatedAt+JobTTL is failed expired.
	JobTTL time.Duration
	// ExpireMargin is how long before the end of its retention an open
	// job is failed expired. A record lives JobTTL after its last write
	// (never less than after its creation), so failing it by then leaves
	// sweeper passes, and clock skew between processes, to spare.
	// Default max(2×SweepInterval, min(1h, JobTTL/4)), at most JobTTL/2:
	// 1h at the default 720h retention.
	ExpireMargin time.Duration
	// ScheduleTick is how often the waker looks for scheduled jobs whose
	// run_at has come (schedule.go): a job is queued at most this long
	// after its run_at, plus the wake's writes. Default 250ms.
	ScheduleTick time.Duration
	// RelayBatch is how many record changes the relay fetches at once.
	// Default 100.
	RelayBatch int
	// FollowLanes is how many record changes the relay handles at once
	// (the changes of one job in order). Default 64: a queued change
	// costs two store round trips in sequence, so under load the relay
	// keeps up with admission only with many changes under way.
	FollowLanes int
	// Broker tunes the answers to worker processes: their claims, beats
	// and the fair scheduling of each type's work (see broker.Config).
	Broker broker.Config
	// Metrics records relay, sweeper and open-job figures; nil records
	// nothing.
	Metrics *metrics.Metrics
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = api.DefaultAttempts
	}
	if c.RenderTimeout == 0 {
		c.RenderTimeout = api.DefaultTimeout
	}
	if c.Grace == 0 {
		c.Grace = 30 * time.Second
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = 5 * time.Second
	}
	if c.QueuedCheckAfter == 0 {
		c.QueuedCheckAfter = 15 * time.Minute
	}
	if c.ScheduleTick == 0 {
		c.ScheduleTick = 250 * time.Millisecond
	}
	if c.RelayBatch == 0 {
		c.RelayBatch = 100
	}
	if c.FollowLanes == 0 {
		c.FollowLanes = 64
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts must be at least 1, got %d", c.MaxAttempts))
	}
	if c.RenderTimeout <= 0 || c.Grace <= 0 || c.SweepInterval <= 0 || c.QueuedCheckAfter <= 0 || c.ScheduleTick <= 0 {
		errs = append(errs, errors.New("render timeout, grace, sweep interval and queued check must be positive"))
	}
	if c.JobTTL < 0 || c.ExpireMargin < 0 || c.JobTTL > 0 && c.ExpireMargin >= c.JobTTL {
		errs = append(errs, fmt.Errorf("job TTL and expire margin must not be negative, the margin within the TTL; got %s and %s", c.JobTTL, c.ExpireMargin))
	}
	if c.RelayBatch < 1 {
		errs = append(errs, fmt.Errorf("relay batch must be at least 1, got %d", c.RelayBatch))
	}
	if c.FollowLanes < 1 || c.FollowLanes > 1024 {
		errs = append(errs, fmt.Errorf("follow lanes must be 1 to 1024, got %d", c.FollowLanes))
	}
	return errors.Join(errs...)
}

// retention is the job TTL (cfg's, else the store's) and the margin before
// its end at which an open job is failed expired; zero when neither
// knows the TTL.
func (c Config) retention(store time.Duration) (ttl, margin time.Duration) {
	ttl = c.JobTTL
	if ttl == 0 {
		ttl = store
	}
	if ttl <= 0 {
		return 0, 0
	}
	margin = c.ExpireMargin
	if margin == 0 {
		margin = min(max(2*c.SweepInterval, min(time.Hour, ttl/4)), ttl/2)
	}
	return ttl, margin
}

// staleAfter is how long a running job may go without a sign of life: its
// attempt budget (the type's, as the record carries it) plus grace.
func (c Config) staleAfter(r *job.Record) time.Duration {
	return r.TimeoutOr(c.RenderTimeout) + c.Grace
}
