package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
)

// Config connects a worker process to a jobgate deployment. Zero fields take
// the documented defaults; only URL and the credentials usually need
// setting.
type Config struct {
	// URL lists the deployment's NATS servers, comma separated.
	// Default nats://127.0.0.1:4222.
	URL string
	// User and Password log in to NATS; for jobgate's embedded server,
	// `jobgate nats-user --worker` prints them. Empty: no credentials.
	User, Password string
	// Conn, if set, is an open connection used instead of URL; the caller
	// keeps ownership (closes it after Stop).
	Conn *nats.Conn
	// Name names this process in the job records it claims and in
	// GET /v1/types. Default host-pid-random. It must be unique among the
	// running processes: a job whose record names this worker but that
	// this process does not run is taken for this worker's own claim
	// whose answer was lost (or a former process of the name's), and run.
	Name string
	// Logger receives structured logs. Default: discarded.
	Logger *slog.Logger

	// AckWait is how long a claimed job may go without a sign of life
	// before the queue hands it to another worker. Default 30s.
	AckWait time.Duration
	// HeartbeatInterval is the longest time between two writes of a running
	// job's record (progress checkpoints count). Default 5s.
	HeartbeatInterval time.Duration
	// StaleAfter: a running job whose heartbeat is older than this when its
	// work comes back is taken to be abandoned by its worker and claimed
	// anew. At least twice HeartbeatInterval, below AckWait. Default 15s.
	StaleAfter time.Duration
	// PullWait is how long one pull for work waits. Default 5s.
	PullWait time.Duration
	// DrainTimeout is how long Stop lets running jobs finish before it
	// interrupts them (their contexts end) and gives their jobs back to the
	// queue for another worker. Default 10s.
	DrainTimeout time.Duration
	// RetryBase is the delay before the second attempt of a failed job; it
	// doubles per attempt, capped at 10 minutes, with ±20% jitter.
	// Default AckWait.
	RetryBase time.Duration
	// TenantWeights share the slots between tenants that have work queued
	// at once: each type's work is queued per requester and taken
	// round-robin across tenants, a tenant's turns round-robin across its
	// requesters with work; a tenant of weight 3 is offered three slots for
	// every one of a tenant of the default weight 1, whatever the number of
	// requesters of either. A tenant alone gets every slot whatever its
	// weight. Weights are 1 to 1000.
	TenantWeights map[string]int
	// TenantMaxRunning caps how many jobs of one tenant, per type, the
	// type's workers hold at once across all processes (a retry waiting
	// for its time counts); the rest of the tenant's work waits even when
	// slots are free. 0: no cap. A capped tenant's work is one queue, so
	// that JetStream holds the cap across processes: its requesters share
	// it first in, first out instead of taking turns. Every process of a
	// type must agree (processes that disagree keep replacing each
	// other's queues of the tenant: nothing is lost, but work is
	// redelivered).
	TenantMaxRunning int
	// TenantMaxRunningFor overrides TenantMaxRunning for single tenants
	// (0 there: no cap for that tenant).
	TenantMaxRunningFor map[string]int
	// NewcomerSlots are handler slots per type, beyond the type's
	// Concurrency, that take work only of a tenant with none of its jobs
	// of the type running in this process, and only while every regular
	// slot is busy: a handler cannot be interrupted, so without them a
	// tenant's first job waits for one of another tenant's long jobs to
	// end. A process thus runs up to Concurrency + NewcomerSlots handlers
	// of a type at once, the extra ones for different tenants. Default 1;
	// -1: none.
	NewcomerSlots int
	// WorkScan is how often a process with free slots looks for tenants
	// with new work: the longest a new job waits on an idle worker.
	// Default 100ms.
	WorkScan time.Duration
	// OnAttempt, if set, is called when an attempt ends, with the type, how
	// it ended (succeeded, retry, failed, lost, given_back) and how long it
	// ran: a hook for metrics.
	OnAttempt func(typ, outcome string, took time.Duration)
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.URL == "" {
		c.URL = "nats://127.0.0.1:4222"
	}
	if c.Name == "" {
		c.Name = defaultName()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
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
	if c.PullWait == 0 {
		c.PullWait = 5 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.RetryBase == 0 {
		c.RetryBase = c.AckWait
	}
	if c.WorkScan == 0 {
		c.WorkScan = 100 * time.Millisecond
	}
	switch {
	case c.NewcomerSlots == 0:
		c.NewcomerSlots = 1
	case c.NewcomerSlots < 0:
		c.NewcomerSlots = 0
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.NewcomerSlots > 64 {
		errs = append(errs, fmt.Errorf("newcomer slots must be at most 64, got %d", c.NewcomerSlots))
	}
	if c.AckWait <= 0 || c.HeartbeatInterval <= 0 || c.PullWait <= 0 || c.DrainTimeout <= 0 || c.RetryBase <= 0 {
		errs = append(errs, errors.New("ack wait, heartbeat interval, pull wait, drain timeout and retry base must be positive"))
	}
	if c.StaleAfter < 2*c.HeartbeatInterval || c.StaleAfter >= c.AckWait {
		errs = append(errs, fmt.Errorf("stale after (%s) must be at least twice the heartbeat interval (%s) and below ack wait (%s)",
			c.StaleAfter, c.HeartbeatInterval, c.AckWait))
	}
	if c.WorkScan <= 0 || c.WorkScan > c.PullWait {
		errs = append(errs, fmt.Errorf("work scan (%s) must be positive and at most pull wait (%s)", c.WorkScan, c.PullWait))
	}
	for tenant, w := range c.TenantWeights {
		if w < 1 || w > 1000 {
			errs = append(errs, fmt.Errorf("weight of tenant %q must be 1 to 1000, got %d", tenant, w))
		}
	}
	if c.TenantMaxRunning < 0 || c.TenantMaxRunning > 10000 {
		errs = append(errs, fmt.Errorf("tenant max running must be 0 to 10000, got %d", c.TenantMaxRunning))
	}
	for tenant, n := range c.TenantMaxRunningFor {
		if n < 0 || n > 10000 {
			errs = append(errs, fmt.Errorf("max running of tenant %q must be 0 to 10000, got %d", tenant, n))
		}
	}
	if len(c.Name) > 128 {
		errs = append(errs, errors.New("name must be at most 128 bytes"))
	}
	return errors.Join(errs...)
}

func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
