package tenantquota

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// DefaultMaxBytes is the default result quota of one tenant: a quarter of
// the default results' byte budget (config's results_max_bytes, 8 GiB),
// so at least four tenants fill it before any other is refused.
const DefaultMaxBytes = 2 << 30

// MinMaxBytes is the smallest quota a deployment may set (1 MiB).
const MinMaxBytes = 1 << 20

// ReadEvery is how often a Tally reads what is stored, at the least: a
// reading that took longer than a twentieth of it stretches the interval to
// twenty times the reading.
const ReadEvery = 30 * time.Second

// readTimeout bounds one reading.
const readTimeout = time.Minute

// Reader reads the bytes stored per tenant (natsjs.ResultFiles.TenantUse).
type Reader func(ctx context.Context) (map[string]int64, error)

// Config configures a Tally.
type Config struct {
	// MaxBytes is each tenant's quota. Required, positive.
	MaxBytes int64
	// Read reads what is stored. Required.
	Read Reader
	// OnRead, if set, is called after each reading with what it read
	// (do not keep or change the map): for metrics.
	OnRead func(use map[string]int64)
	// Log takes a failed reading's warning. Default: discarded.
	Log *slog.Logger
}

// Tally is one process's count of each tenant's stored result bytes (see
// the package doc). Safe for concurrent use; a nil Tally counts nothing
// and refuses nothing.
type Tally struct {
	cfg Config

	reading sync.Mutex // held by the one reading under way

	mu     sync.Mutex
	listed map[string]int64 // the last reading
	before map[string]int64 // stored here before the reading under way began
	since  map[string]int64 // stored here since the reading under way began
	flight map[string]int64 // reserved by this process's uploads under way
}

// New returns a tally that has read nothing yet: until its first reading
// it counts only this process's own uploads.
func New(cfg Config) (*Tally, error) {
	if cfg.MaxBytes <= 0 || cfg.Read == nil {
		return nil, errors.New("tenantquota: a positive quota and a reader are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Tally{cfg: cfg, listed: map[string]int64{}, before: map[string]int64{},
		since: map[string]int64{}, flight: map[string]int64{}}, nil
}

// MaxBytes is each tenant's quota.
func (t *Tally) MaxBytes() int64 {
	if t == nil {
		return 0
	}
	return t.cfg.MaxBytes
}

// Used is what tenant stores as this process knows it: the last reading,
// this process's results stored since, and its uploads under way.
func (t *Tally) Used(tenant string) int64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.usedLocked(tenant)
}

func (t *Tally) usedLocked(tenant string) int64 {
	return t.listed[tenant] + t.before[tenant] + t.since[tenant] + t.flight[tenant]
}

// Reserve counts n more bytes of an upload of tenant's under way, unless
// they would take the tenant past its quota: then it reserves nothing and
// returns false, with what the tenant uses.
func (t *Tally) Reserve(tenant string, n int64) (bool, int64) {
	if t == nil || n <= 0 {
		return true, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	used := t.usedLocked(tenant)
	if used+n > t.cfg.MaxBytes {
		return false, used
	}
	t.flight[tenant] += n
	return true, used + n
}

// Release ends an upload that reserved n bytes: stored says its object was
// stored, and then it counts as stored by this process until a reading
// that began after it finds it.
func (t *Tally) Release(tenant string, n int64, stored bool) {
	if t == nil || n <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if left := t.flight[tenant] - n; left > 0 {
		t.flight[tenant] = left
	} else {
		delete(t.flight, tenant)
	}
	if stored {
		t.since[tenant] += n
	}
}

// Refresh reads what is stored now, within ctx and at most a minute. A
// failed reading keeps the last one (and this process's own count).
func (t *Tally) Refresh(ctx context.Context) error {
	_, err := t.refresh(ctx)
	return err
}

func (t *Tally) refresh(ctx context.Context) (time.Duration, error) {
	if t == nil {
		return 0, nil
	}
	t.reading.Lock()
	defer t.reading.Unlock()
	t.mu.Lock()
	// What was stored so far is in this reading; what is stored from now
	// on may not be.
	for tenant, n := range t.since {
		t.before[tenant] += n
	}
	t.since = map[string]int64{}
	t.mu.Unlock()
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	use, err := t.cfg.Read(rctx)
	cancel()
	took := time.Since(start)
	if err != nil {
		return took, err
	}
	t.mu.Lock()
	t.listed, t.before = use, map[string]int64{}
	t.mu.Unlock()
	if t.cfg.OnRead != nil {
		t.cfg.OnRead(use)
	}
	return took, nil
}

// Run reads what is stored at once and then every ReadEvery (or twenty
// times as long as the last reading took, if longer) until ctx ends.
func (t *Tally) Run(ctx context.Context) {
	if t == nil {
		return
	}
	for {
		took, err := t.refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			t.cfg.Log.Warn("tenants' stored result bytes not read; the last reading stands", "err", err)
		}
		timer := time.NewTimer(max(ReadEvery, 20*took))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}
