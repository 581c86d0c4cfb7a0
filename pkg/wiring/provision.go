package wiring

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Layout is the shape of the JetStream resources of one deployment. Every
// process of a deployment must agree on it; Provision is idempotent for equal
// layouts.
type Layout struct {
	// Replicas of every stream, bucket and object store: 1 embedded, 3 on a
	// cluster.
	Replicas int
	// JobTTL is how long a job record (and so its idempotency key) lives
	// after its last change.
	JobTTL time.Duration
	// ResultTTL is how long result objects are kept.
	ResultTTL time.Duration
	// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id.
	DuplicateWindow time.Duration
	// EventsMaxAge is how long events stay replayable on JOBGATE_EVENTS.
	EventsMaxAge time.Duration
}

// DefaultLayout is the layout of an embedded single-node deployment.
func DefaultLayout() Layout {
	return Layout{
		Replicas:        1,
		JobTTL:          720 * time.Hour,
		ResultTTL:       168 * time.Hour,
		DuplicateWindow: 10 * time.Minute,
		EventsMaxAge:    72 * time.Hour,
	}
}

func (l Layout) validate() error {
	if l.Replicas < 1 || l.Replicas > 5 {
		return fmt.Errorf("replicas must be 1 to 5, got %d", l.Replicas)
	}
	if l.JobTTL < time.Minute {
		return fmt.Errorf("job TTL must be at least 1m, got %s", l.JobTTL)
	}
	if l.ResultTTL < time.Minute {
		return fmt.Errorf("result TTL must be at least 1m, got %s", l.ResultTTL)
	}
	if l.DuplicateWindow <= 0 || l.EventsMaxAge <= 0 {
		return errors.New("duplicate window and events max age must be positive")
	}
	return nil
}

// Resources are the provisioned handles every service works with.
type Resources struct {
	JS      jetstream.JetStream
	Jobs    *Store
	Meta    jetstream.KeyValue
	Notices jetstream.KeyValue
	Results jetstream.ObjectStore
	Layout  Layout
}

// Provision creates or updates every stream, bucket and object store of the
// deployment and returns handles on them. Several processes may call it at
// once: creation is idempotent and an update to the same config is a no-op.
func Provision(ctx context.Context, js jetstream.JetStream, l Layout) (*Resources, error) {
	if err := l.validate(); err != nil {
		return nil, fmt.Errorf("provision: %w", err)
	}
	jobs, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         BucketJobs,
		Description:    "jobgate job records: idempotency and status in one document",
		History:        1,
		TTL:            l.JobTTL,
		LimitMarkerTTL: time.Minute,
		Replicas:       l.Replicas,
		Storage:        jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("provision %s: %w", BucketJobs, err)
	}
	meta, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: BucketMeta, Description: "jobgate deployment secrets", History: 1,
		Replicas: l.Replicas, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("provision %s: %w", BucketMeta, err)
	}
	notices, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: BucketNotices, Description: "jobgate notifier send records", History: 1,
		TTL: l.JobTTL, Replicas: l.Replicas, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("provision %s: %w", BucketNotices, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamWork,
		Description: "jobgate work queue",
		Subjects:    []string{AllWork},
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  l.DuplicateWindow,
		MaxAge:      l.JobTTL,
		Replicas:    l.Replicas,
		Storage:     jetstream.FileStorage,
	}); err != nil {
		return nil, fmt.Errorf("provision %s: %w", StreamWork, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamEvents,
		Description: "jobgate job state changes",
		Subjects:    []string{AllEvents},
		Retention:   jetstream.LimitsPolicy,
		Duplicates:  l.DuplicateWindow,
		MaxAge:      l.EventsMaxAge,
		Replicas:    l.Replicas,
		Storage:     jetstream.FileStorage,
	}); err != nil {
		return nil, fmt.Errorf("provision %s: %w", StreamEvents, err)
	}
	results, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: BucketResults, Description: "jobgate rendered results",
		TTL: l.ResultTTL, Replicas: l.Replicas, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("provision %s: %w", BucketResults, err)
	}
	return &Resources{
		JS: js, Jobs: &Store{kv: jobs, ttl: l.JobTTL}, Meta: meta, Notices: notices,
		Results: results, Layout: l,
	}, nil
}
