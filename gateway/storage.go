package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/tenantquota"
)

// storageSource reports the byte budgets' use (natsjs.Resources).
type storageSource interface {
	StorageUse(ctx context.Context) ([]natsjs.StorageUse, error)
}

// admitBelow is the share of any byte budget past which admission answers
// 507 storage-full: the rest is left to the jobs already admitted, whose
// state changes, events, notices and results must still fit. At the budget
// itself JetStream refuses the write (discard new), so nothing stored is
// ever dropped for room.
const admitBelow = 0.9

// storageRecheck is how long one reading of the budgets is trusted: the
// stream infos are read at most this often, on the admission path.
const storageRecheck = 2 * time.Second

// tenantResults reads what each tenant stores of results
// (natsjs.ResultFiles.TenantUse).
type tenantResults interface {
	TenantUse(ctx context.Context) (map[string]int64, error)
}

// errTenantResultsFull marks a refusal for the tenant's result quota (the
// problem is storage-full, its detail says whose).
var errTenantResultsFull = errors.New("the tenant's result quota is used up")

// storageGate tells admission whether the budgets leave room for a job.
type storageGate struct {
	src     storageSource // the deployment's byte budgets
	metrics *metrics.Metrics
	now     func() time.Time
	// tenants counts each tenant's stored result bytes against its result
	// quota, read in the background (internal/tenantquota): by start until
	// Stop when runTenants (the gateway made it), else by its owner
	// (Config.ResultQuota). tenantsDone is closed when the gateway's
	// reading loop ended.
	tenants     *tenantquota.Tally
	runTenants  bool
	tenantsDone chan struct{}

	mu      sync.Mutex // held by the one reading the budgets
	checked time.Time
	full    error // job.ErrStorageFull naming the resource, or nil
}

// newStorageGate checks the budgets of src and each tenant's result quota:
// on cfg.ResultQuota, else on a tally of its own of files.
func newStorageGate(src storageSource, files tenantResults, cfg Config, log *slog.Logger) (*storageGate, error) {
	s := &storageGate{src: src, metrics: cfg.Metrics, now: cfg.Now, tenants: cfg.ResultQuota}
	if s.tenants != nil {
		return s, nil
	}
	t, err := tenantquota.New(tenantquota.Config{MaxBytes: cfg.TenantResultsMaxBytes, Read: files.TenantUse, Log: log,
		OnRead: ResultQuotaMetrics(cfg.Metrics, cfg.TenantResultsMaxBytes)})
	if err != nil {
		return nil, err
	}
	s.tenants, s.runTenants = t, true
	return s, nil
}

// ResultQuotaMetrics is the OnRead of a tally of the tenants' stored result
// bytes held to quota: it sets m's tenant result gauges, those at the
// quota counted at the share past which admission refuses. A tally given
// as Config.ResultQuota takes it from its owner.
func ResultQuotaMetrics(m *metrics.Metrics, quota int64) func(use map[string]int64) {
	return func(use map[string]int64) { m.SetTenantResults(use, quota, admitBelow) }
}

// start reads the tenants' stored results until runCtx ends, when the
// gateway made their tally.
func (s *storageGate) start(runCtx context.Context) {
	if !s.runTenants || s.tenantsDone != nil {
		return
	}
	s.tenantsDone = make(chan struct{})
	go func() {
		defer close(s.tenantsDone)
		s.tenants.Run(runCtx)
	}()
}

// wait waits, at most 6 s, for the reading loop to end once its run
// context ended (a reading under way ends with it).
func (s *storageGate) wait() {
	if s.tenantsDone == nil {
		return
	}
	t := time.NewTimer(6 * time.Second)
	defer t.Stop()
	select {
	case <-s.tenantsDone:
	case <-t.C:
	}
}

// room returns nil when a new job of tenant fits, else an error wrapping
// job.ErrStorageFull: a budget of the deployment is 90% used, or the
// tenant's stored results are 90% of its result quota (as last read, in the
// background: never a read on this path). When the budgets cannot be read
// it lets the job in: the write itself then says whether the store is full
// or unavailable.
func (s *storageGate) room(ctx context.Context, tenant string) error {
	if err := s.budgets(ctx); err != nil {
		return err
	}
	used, quota := s.tenants.Used(tenant), s.tenants.MaxBytes()
	if float64(used) < admitBelow*float64(quota) {
		return nil
	}
	return fmt.Errorf("%w: tenant %s stores %d of its %d bytes: %w", errTenantResultsFull, tenant, used, quota,
		job.Userf(job.ErrStorageFull, "this tenant's stored results (%d bytes) fill %d%% or more of its result quota of %d bytes; "+
			"nothing was admitted: room comes back as results expire; retry after Retry-After with the same Idempotency-Key",
			used, int(admitBelow*100), quota))
}

// budgets is room's check of the deployment's byte budgets.
func (s *storageGate) budgets(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); now.Sub(s.checked) >= storageRecheck {
		use, err := s.src.StorageUse(ctx)
		if err != nil {
			return nil
		}
		s.checked, s.full = now, nil
		for _, u := range use {
			s.metrics.SetStorage(u.Resource, u.Bytes, u.MaxBytes)
			if u.MaxBytes > 0 && float64(u.Bytes) >= admitBelow*float64(u.MaxBytes) && s.full == nil {
				s.full = fmt.Errorf("%w: %s holds %d of its %d bytes", job.ErrStorageFull, u.Resource, u.Bytes, u.MaxBytes)
			}
		}
	}
	return s.full
}
