package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
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
	// `jobgate nats-user --worker --type T` prints them. The credential
	// reaches only the types it was made for.
	User, Password string
	// Conn, if set, is an open connection used instead of URL; the caller
	// keeps ownership (closes it after Stop). Its inbox prefix must be the
	// credential's (see docs/protocol.md) unless it has jobgate's own
	// permissions.
	Conn *nats.Conn
	// Credential is the credential id the requests name. Default: derived
	// from User (jobgate's own workers use "jobgate" on an in-process
	// connection).
	Credential string
	// Name names this process in the job records it claims and in
	// GET /v1/types ([A-Za-z0-9_.:@-], at most 128 bytes).
	// Default host-pid-random.
	Name string
	// Logger receives structured logs. Default: discarded.
	Logger *slog.Logger

	// HeartbeatInterval is the longest time between two beats of a running
	// job (jobgate may ask for shorter). Default 5s.
	HeartbeatInterval time.Duration
	// PullWait is how long one request for work waits. Default 5s, at most
	// 10s.
	PullWait time.Duration
	// DrainTimeout is how long Stop lets running jobs finish before it
	// interrupts them (their contexts end) and gives their jobs back for
	// another worker. Default 10s.
	DrainTimeout time.Duration
	// ConnectTimeout bounds the first connection: a wrong URL or
	// credentials fail Start within it. Default 5s.
	ConnectTimeout time.Duration
	// NewcomerSlots are handler slots per type, beyond the type's
	// Concurrency, that take work only of a tenant with none of its jobs
	// of the type running in this process, and only while every regular
	// slot is busy: a handler cannot be interrupted, so without them a
	// tenant's first job waits for one of another tenant's long jobs to
	// end. Default 1; -1: none.
	NewcomerSlots int
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
	if c.Credential == "" {
		c.Credential = wire.CredentialID(c.User)
	}
	if c.Name == "" {
		c.Name = defaultName()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.PullWait == 0 {
		c.PullWait = 5 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 5 * time.Second
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
	if c.HeartbeatInterval <= 0 || c.PullWait <= 0 || c.DrainTimeout <= 0 || c.ConnectTimeout <= 0 {
		errs = append(errs, errors.New("heartbeat interval, pull wait, drain timeout and connect timeout must be positive"))
	}
	if c.PullWait > wire.MaxWait {
		errs = append(errs, fmt.Errorf("pull wait must be at most %s, got %s", wire.MaxWait, c.PullWait))
	}
	if !wire.ValidWorkerName(c.Name) {
		errs = append(errs, fmt.Errorf("name %q must match [A-Za-z0-9_.:@-]{1,128}", c.Name))
	}
	if !wire.ValidCredential(c.Credential) {
		errs = append(errs, fmt.Errorf("credential %q is not a credential id", c.Credential))
	}
	return errors.Join(errs...)
}

var nameJunk = regexp.MustCompile(`[^A-Za-z0-9_.:@-]`)

func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	host = nameJunk.ReplaceAllString(host, "_")
	if len(host) > 96 {
		host = host[:96]
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
