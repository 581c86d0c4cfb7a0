package natsjs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go/jetstream"
)

// BucketBatches holds one record per batch (POST /v1/batches), key
// tenant.requester.id: the batch's idempotency record and its items.
const BucketBatches = "JOBGATE_BATCHES"

// ConsumerBatchRelay is the dispatchers' durable consumer on the batch
// record change log: it admits the items of a batch whose gateway died
// before it had.
const ConsumerBatchRelay = "batch_relay"

const batchesStream = "KV_" + BucketBatches

// batchesKV is the bucket's configuration in a layout: history 1, the job
// records' retention and byte budget.
func (l Layout) batchesKV() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      BucketBatches,
		Description: "jobgate batches: one create-only record per batch with its items",
		History:     1,
		TTL:         l.JobTTL,
		MaxBytes:    l.StoreMaxBytes,
		Replicas:    l.Replicas,
		Storage:     jetstream.FileStorage,
	}
}

// batchesResource is the bucket as Provision ensures it.
func (l Layout) batchesResource() resource {
	c := l.batchesKV()
	return resource{name: BucketBatches, bucket: true, stream: batchesStream,
		create: func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.CreateKeyValue(ctx, c)
			return err
		},
		want: expect{replicas: l.Replicas, maxAge: l.JobTTL, ageSetting: SettingJobTTL, history: 1,
			maxBytes: l.StoreMaxBytes, bytesName: SettingStoreBytes}}
}

// BatchStore keeps batch records in JOBGATE_BATCHES. Its errors wrap
// job.ErrNotFound, job.ErrUnavailable, job.ErrPayloadTooLarge, ErrExists
// and ErrStale.
type BatchStore struct {
	kv jetstream.KeyValue
	js jetstream.JetStream
}

func newBatchStore(js jetstream.JetStream, kv jetstream.KeyValue) *BatchStore {
	return &BatchStore{kv: kv, js: js}
}

// Create writes a new batch record, create-only: of concurrent creates of
// one key exactly one succeeds, the rest get ErrExists. A record past
// job.MaxBatchRecord is refused before anything is written.
func (s *BatchStore) Create(ctx context.Context, b *job.BatchRecord) error {
	data, err := b.Marshal()
	if err != nil {
		return err
	}
	if len(data) > job.MaxBatchRecord {
		return job.Userf(job.ErrPayloadTooLarge, "the batch's jobs, with their params' defaults, take %d bytes stored; at most %d fit", len(data), job.MaxBatchRecord)
	}
	rev, err := s.kv.Create(ctx, b.Key(), data)
	if err != nil {
		return fmt.Errorf("batch %s: %w", b.ID, mapErr(err))
	}
	b.Revision = rev
	return nil
}

// Get reads the batch record under key.
func (s *BatchStore) Get(ctx context.Context, key string) (*job.BatchRecord, error) {
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("batch: %w", mapErr(err))
	}
	return job.UnmarshalBatch(e.Value(), e.Revision())
}

// Update writes b if the stored revision is still b.Revision (a lost race
// is ErrStale) and sets b.Revision to the new one.
func (s *BatchStore) Update(ctx context.Context, b *job.BatchRecord) error {
	data, err := b.Marshal()
	if err != nil {
		return err
	}
	rev, err := s.kv.Update(ctx, b.Key(), data, b.Revision)
	if err != nil {
		return fmt.Errorf("batch %s: %w", b.ID, mapErr(err))
	}
	b.Revision = rev
	return nil
}

// MarkAdmitted sets the batch's AdmittedAt by compare-and-set, unless it is
// set already (a lost race against another admitter is no error).
func (s *BatchStore) MarkAdmitted(ctx context.Context, b *job.BatchRecord, now time.Time) error {
	for range 5 {
		if b.AdmittedAt != nil {
			return nil
		}
		next := *b
		t := now.UTC()
		next.AdmittedAt = &t
		err := s.Update(ctx, &next)
		if err == nil {
			*b = next
			return nil
		}
		if !errors.Is(err, ErrStale) {
			return err
		}
		cur, err := s.Get(ctx, b.Key())
		if err != nil {
			return err
		}
		*b = *cur
	}
	return fmt.Errorf("batch %s: %w: admitted mark did not settle", b.ID, job.ErrUnavailable)
}

// ItemStore is what admitting a batch's items needs of the job record
// store (Store).
type ItemStore interface {
	Create(ctx context.Context, r *job.Record) error
	Get(ctx context.Context, key string) (*job.Record, error)
}

// admitConcurrency is how many item creates one admission has in flight.
const admitConcurrency = 16

// ErrItemTaken: an item's job id is taken by a job that is not that item
// (another fingerprint). Ids are HMACs of the batch and the index, so this
// means a record was written under the id by something else.
var ErrItemTaken = errors.New("batch item id taken by another job")

// AdmitItems creates the job record of every item of b, create-only, and
// returns once each exists: created now, or found (an earlier run, a
// concurrent one) with the item's fingerprint. Any number of runs, at once
// or after crashes, create each item once. after, if not nil, is called
// with the number of items handled so far after each create (the crash
// tests' failpoint). created counts the records this run wrote.
func AdmitItems(ctx context.Context, jobs ItemStore, b *job.BatchRecord, after func(done int)) (created int, err error) {
	var (
		mu    sync.Mutex
		first error
		done  int
		wg    sync.WaitGroup
	)
	next := make(chan int)
	for range min(admitConcurrency, len(b.Items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				made, err := admitItem(ctx, jobs, b, i)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if made {
					created++
				}
				done++
				n := done
				mu.Unlock()
				if after != nil && err == nil {
					after(n)
				}
			}
		}()
	}
	for i := range b.Items {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = fmt.Errorf("batch %s: %w: %w", b.ID, job.ErrUnavailable, ctx.Err())
	}
	return created, first
}

func admitItem(ctx context.Context, jobs ItemStore, b *job.BatchRecord, i int) (bool, error) {
	rec := b.ItemRecord(i)
	for range 3 {
		err := jobs.Create(ctx, rec)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, ErrExists) {
			return false, fmt.Errorf("batch %s item %d: %w", b.ID, i, err)
		}
		have, err := jobs.Get(ctx, rec.Key())
		if errors.Is(err, job.ErrNotFound) {
			continue // expired between the two calls
		}
		if err != nil {
			return false, fmt.Errorf("batch %s item %d: %w", b.ID, i, err)
		}
		if have.Fingerprint != rec.Fingerprint {
			return false, fmt.Errorf("batch %s item %d (%s): %w", b.ID, i, rec.ID, ErrItemTaken)
		}
		return false, nil
	}
	return false, fmt.Errorf("batch %s item %d: %w: create did not settle", b.ID, i, job.ErrUnavailable)
}

// BatchChanges delivers the batch record change log through the
// dispatchers' shared durable consumer (ConsumerBatchRelay). Its changes
// are LoggedChanges; BatchOf decodes one.
func (s *BatchStore) ConsumeChanges(ctx context.Context, batch int) (*ChangeLog, error) {
	if s.js == nil {
		return nil, errors.New("batch change log: store has no JetStream handle")
	}
	cons, err := s.js.CreateOrUpdateConsumer(ctx, batchesStream, jetstream.ConsumerConfig{
		Durable:       ConsumerBatchRelay,
		Description:   "jobgate batch relay: admits the items of a committed batch a gateway left unadmitted",
		FilterSubject: batchChangesPrefix + ">",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       RelayAckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", ConsumerBatchRelay, mapErr(err))
	}
	iter, err := cons.Messages(changePull(batch)...)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", ConsumerBatchRelay, mapErr(err))
	}
	return &ChangeLog{cons: cons, iter: iter}, nil
}

const batchChangesPrefix = "$KV." + BucketBatches + "."

// BatchChangeKey returns the record key of a batch change-log subject, or "".
func BatchChangeKey(subject string) string {
	if len(subject) <= len(batchChangesPrefix) || subject[:len(batchChangesPrefix)] != batchChangesPrefix {
		return ""
	}
	return subject[len(batchChangesPrefix):]
}

// Batch decodes the batch record as of this change.
func (c *LoggedChange) Batch() (*job.BatchRecord, error) {
	md, err := c.msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("change %s: %w", c.msg.Subject(), err)
	}
	return job.UnmarshalBatch(c.msg.Data(), md.Sequence.Stream)
}
