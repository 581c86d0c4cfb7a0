package broker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/schemapool"
	"github.com/jobgate/jobgate/internal/tenantquota"
)

// Config tunes a broker. Zero fields take the documented defaults.
type Config struct {
	// Host names this broker in upload subjects; unique per process.
	// Default random.
	Host string
	// BeatInterval is the longest time a worker may go between two beats
	// of a held job. Default 5s.
	BeatInterval time.Duration
	// StaleAfter: a claim with no beat for this long is taken over when its
	// broker next looks at it. At least twice BeatInterval. Default 3 ×
	// BeatInterval.
	StaleAfter time.Duration
	// RetryBase is the delay before a failed job's second attempt; it
	// doubles per attempt, at most 10 minutes, ±20% jitter. Default 30s.
	RetryBase time.Duration
	// MaxAttempts is the attempts of a job whose record names none.
	// Default 3.
	MaxAttempts int
	// TenantWeights, TenantMaxRunning and TenantMaxRunningFor share a
	// type's workers between tenants (see natsjs.FairConfig).
	TenantWeights       map[string]int
	TenantMaxRunning    int
	TenantMaxRunningFor map[string]int
	// MaxUploads bounds the result uploads open on this broker. Default 256.
	MaxUploads int
	// MaxUploadsPer bounds those of one credential. Default 64.
	MaxUploadsPer int
	// MaxWorkers bounds the worker processes of one type announced at once.
	// Default 1024.
	MaxWorkers int
	// UploadIdle ends an upload that received no chunk for this long.
	// Default 30s.
	UploadIdle time.Duration
	// TenantResultsMaxBytes is each tenant's result quota: an upload that
	// would take its tenant's stored result bytes past it is refused as it
	// arrives and its job fails budget_exceeded (see internal/tenantquota
	// for how the bytes are counted). Default tenantquota.DefaultMaxBytes.
	TenantResultsMaxBytes int64
	// ResultQuota, if set, is a tally of the tenants' stored result bytes
	// that the broker shares with other components of its process (the
	// gateway's admission, in serve): its uploads reserve their bytes in
	// it, and it is the tally's MaxBytes that they are held to
	// (TenantResultsMaxBytes is then not read). Whoever made it runs it
	// (Tally.Run); the broker only counts on it. Default nil: the broker
	// makes its own on Stores.Results and reads it from Start until Stop.
	ResultQuota *tenantquota.Tally
	// OnResultQuotaFull, if set, is called when an upload is refused for
	// its tenant's result quota.
	OnResultQuotaFull func()
	// Rate and Burst bound the requests per second of one credential.
	// Default 2000 and 4000.
	Rate, Burst float64
	// DeclareBurst and DeclareEvery bound how often one credential changes
	// its declarations (a new schema or new limits, each compiled): a token
	// bucket of DeclareBurst tokens, one more every DeclareEvery. A
	// declaration identical to the stored one, a type's first declaration
	// and jobgate's own take none. Past it a declaration is answered
	// throttled with the wait (wire.Error.RetryAfterMS). Default 5 and
	// 10s.
	DeclareBurst int
	DeclareEvery time.Duration
	// CompileWait bounds how long a declaration waits for the schema
	// compiler (Schemas) busy with others before it is answered throttled.
	// Default 5s.
	CompileWait time.Duration
	// Schemas compiles the declarations' schemas. Default
	// schemapool.Default, the process's, which its gateway shares.
	Schemas *schemapool.Pool
	// MaxWaiting bounds the next requests held at once per credential.
	// Default 1024.
	MaxWaiting int
	// MaxInFlight bounds the requests this broker handles at once, of all
	// credentials together (each is a goroutine, a next one held up to
	// 10 s); past it a request is answered throttled. Default 8192.
	MaxInFlight int
	// OnAttempt, if set, is called when an attempt ends, with the type, how
	// it ended (succeeded, retry, failed, given_back, worker_lost: a stale
	// claim taken over or a last attempt's vanished worker) and how long it
	// ran, claim to verdict, from its history entry (negative: unknown).
	OnAttempt func(typ, outcome string, took time.Duration)
	// OnFlowHeldBack and OnFlowPlace, if set, are called when a limit of
	// a type's flow control holds a start back, and when a start takes a
	// concurrency place, with the type and the limit's class (tenant,
	// requester, params; rate).
	OnFlowHeldBack, OnFlowPlace func(typ, class string)
	// OnEvent, if set, is called once the event of a change this broker
	// wrote is stored (by it, or found stored), with the record's key and
	// revision: the relay of the same dispatcher then needs no check of it.
	OnEvent func(key string, revision uint64)
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Host == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		c.Host = "b" + hex.EncodeToString(b[:])
	}
	if c.BeatInterval == 0 {
		c.BeatInterval = 5 * time.Second
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = 3 * c.BeatInterval
	}
	if c.RetryBase == 0 {
		c.RetryBase = 30 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 3
	}
	if c.MaxUploads == 0 {
		c.MaxUploads = 256
	}
	if c.MaxUploadsPer == 0 {
		c.MaxUploadsPer = 64
	}
	if c.MaxWorkers == 0 {
		c.MaxWorkers = 1024
	}
	if c.UploadIdle == 0 {
		c.UploadIdle = 30 * time.Second
	}
	if c.TenantResultsMaxBytes == 0 {
		c.TenantResultsMaxBytes = tenantquota.DefaultMaxBytes
	}
	if c.Rate == 0 {
		c.Rate = 2000
	}
	if c.Burst == 0 {
		c.Burst = 2 * c.Rate
	}
	if c.DeclareBurst == 0 {
		c.DeclareBurst = 5
	}
	if c.DeclareEvery == 0 {
		c.DeclareEvery = 10 * time.Second
	}
	if c.CompileWait == 0 {
		c.CompileWait = 5 * time.Second
	}
	if c.Schemas == nil {
		c.Schemas = schemapool.Default
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = 1024
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 8192
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.BeatInterval <= 0 || c.StaleAfter < 2*c.BeatInterval {
		errs = append(errs, fmt.Errorf("stale after (%s) must be at least twice the beat interval (%s)", c.StaleAfter, c.BeatInterval))
	}
	if c.RetryBase <= 0 || c.MaxAttempts < 1 || c.MaxUploads < 1 || c.MaxUploadsPer < 1 || c.MaxWorkers < 1 || c.UploadIdle <= 0 ||
		c.Rate <= 0 || c.Burst < 1 || c.MaxWaiting < 1 || c.MaxInFlight < 1 || c.TenantResultsMaxBytes < 0 ||
		c.DeclareBurst < 1 || c.DeclareEvery <= 0 || c.CompileWait <= 0 {
		errs = append(errs, errors.New("retry base, max attempts, uploads, upload idle, rate, burst, waiting, the declaration limits and the tenant result quota must be positive"))
	}
	for tenant, w := range c.TenantWeights {
		if w < 1 || w > 1000 {
			errs = append(errs, fmt.Errorf("weight of tenant %q must be 1 to 1000, got %d", tenant, w))
		}
	}
	if c.TenantMaxRunning < 0 || c.TenantMaxRunning > 10000 {
		errs = append(errs, fmt.Errorf("tenant max running must be 0 to 10000, got %d", c.TenantMaxRunning))
	}
	return errors.Join(errs...)
}

// weight is a tenant's share of a type's workers.
func (c Config) weight(tenant string) int {
	if w, ok := c.TenantWeights[tenant]; ok && w > 0 {
		return w
	}
	return 1
}

// capOf is how many of a tenant's jobs of a type may be held at once (0:
// no cap).
func (c Config) capOf(tenant string) int {
	if n, ok := c.TenantMaxRunningFor[tenant]; ok {
		return n
	}
	return c.TenantMaxRunning
}
