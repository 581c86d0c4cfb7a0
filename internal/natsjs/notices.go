package natsjs

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Notices is the JOBGATE_NOTICES bucket: the notifier's delivery states and
// its create-only mail claims, by key. A missing key is job.ErrNotFound, a
// taken create ErrExists, a lost compare-and-set ErrStale, an unreachable
// store job.ErrUnavailable.
type Notices struct {
	kv jetstream.KeyValue
}

// NewNotices returns the notices in kv (Provision returns them).
func NewNotices(kv jetstream.KeyValue) *Notices { return &Notices{kv: kv} }

// Get returns the value under key and its revision.
func (n *Notices) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := n.kv.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("notice %s: %w", key, mapErr(err))
	}
	return e.Value(), e.Revision(), nil
}

// Put writes key unconditionally.
func (n *Notices) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := n.kv.Put(ctx, key, value)
	if err != nil {
		return 0, fmt.Errorf("notice %s: %w", key, mapErr(err))
	}
	return rev, nil
}

// Create writes key only if it holds no value: of any number of concurrent
// creates exactly one succeeds (a claim), the others get ErrExists.
func (n *Notices) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := n.kv.Create(ctx, key, value)
	if err != nil {
		return 0, fmt.Errorf("notice %s: %w", key, mapErr(err))
	}
	return rev, nil
}

// Update writes key if its revision is still rev (ErrStale otherwise).
func (n *Notices) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	next, err := n.kv.Update(ctx, key, value, rev)
	if err != nil {
		return 0, fmt.Errorf("notice %s: %w", key, mapErr(err))
	}
	return next, nil
}

// Delete removes key if its revision is still rev (ErrStale otherwise).
func (n *Notices) Delete(ctx context.Context, key string, rev uint64) error {
	if err := n.kv.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil {
		return fmt.Errorf("notice %s: %w", key, mapErr(err))
	}
	return nil
}
