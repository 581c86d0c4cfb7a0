package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/nats-io/nats.go/jetstream"
)

// Layout is the shape of the JetStream resources of one deployment. Every
// process of a deployment must agree on it; Provision is idempotent for equal
// layouts and refuses a different one.
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
	// StoreMaxBytes is the byte budget of each of the job records, work,
	// events, notices, deliveries and batches. At it a write is refused
	// (discard new: nothing stored is ever dropped for room), which the
	// adapters report as job.ErrStorageFull.
	StoreMaxBytes int64
	// ResultsMaxBytes is the byte budget of the results object store.
	ResultsMaxBytes int64
}

// smallBucketBytes is the budget of the small buckets (secrets, type
// declarations, worker presence, endpoint slots): a gateway keeps at most
// 4 MiB of declarations, the others hold a few keys.
const smallBucketBytes = 64 << 20

// StorageReserve is what the layout's budgets add up to: the JetStream
// storage a server must grant them (an embedded server is given it).
func (l Layout) StorageReserve() int64 {
	return 6*l.StoreMaxBytes + l.scheduleBytes() + l.ResultsMaxBytes + 4*smallBucketBytes
}

// scheduleBytes is the byte budget of the scheduled set: a quarter of the
// store budget, as its entries (about 150 bytes) are a quarter of a
// record or less; 512 MiB by default, over three million scheduled jobs.
func (l Layout) scheduleBytes() int64 { return l.StoreMaxBytes / 4 }

// DefaultLayout is the layout of an embedded single-node deployment with
// serve's default settings, which internal/config's Default names once
// (replicas, retention, byte budgets: with the small buckets the default
// budgets reserve 20.2 GiB of a server's JetStream storage); the rest are
// the layout's own.
func DefaultLayout() Layout {
	d := config.Default()
	return Layout{
		Replicas:        d.NATS.Replicas,
		JobTTL:          d.JobTTL,
		ResultTTL:       d.ResultTTL,
		DuplicateWindow: 10 * time.Minute,
		EventsMaxAge:    72 * time.Hour,
		StoreMaxBytes:   d.StoreMaxBytes,
		ResultsMaxBytes: d.ResultsMaxBytes,
	}
}

func (l Layout) validate() error {
	if l.Replicas < 1 || l.Replicas > 5 {
		return fmt.Errorf("replicas must be 1 to 5, got %d", l.Replicas)
	}
	if l.JobTTL < l.DuplicateWindow || l.JobTTL < time.Minute {
		// JOBGATE_WORK keeps messages for the job TTL and must remember
		// their ids for its duplicate window; JetStream refuses a window
		// longer than the age limit.
		return fmt.Errorf("%s: job TTL must be at least %s (the work queue's duplicate window), got %s",
			SettingJobTTL, max(l.DuplicateWindow, time.Minute), l.JobTTL)
	}
	if l.ResultTTL < time.Minute {
		return fmt.Errorf("result TTL must be at least 1m, got %s", l.ResultTTL)
	}
	if l.StoreMaxBytes < 64<<10 || l.ResultsMaxBytes < 64<<10 {
		return fmt.Errorf("store and results byte budgets must be at least 64 KiB, got %d and %d", l.StoreMaxBytes, l.ResultsMaxBytes)
	}
	if l.DuplicateWindow <= 0 || l.EventsMaxAge <= 0 {
		return errors.New("duplicate window and events max age must be positive")
	}
	return nil
}

// The settings a mismatch can name, as an operator finds them.
const (
	SettingReplicas  = "replicas (nats.replicas, JOBGATE_NATS_REPLICAS, --replicas)"
	SettingJobTTL    = "job TTL (job_ttl, JOBGATE_JOB_TTL, --job-ttl)"
	SettingResultTTL = "result TTL (result_ttl, JOBGATE_RESULT_TTL, --result-ttl)"
	settingDupWindow = "duplicate window"
	settingEventsAge = "events max age"
	settingStorage   = "storage"
	settingRetention = "retention"
	settingHistory   = "history"
	settingSubjects  = "subjects"
	settingMarkerTTL = "limit marker TTL"
)

// The byte budgets, as an operator finds them.
const (
	SettingStoreBytes   = "store byte budget (store_max_bytes, JOBGATE_STORE_MAX_BYTES)"
	SettingResultsBytes = "results byte budget (results_max_bytes, JOBGATE_RESULTS_MAX_BYTES)"
	settingSmallBytes   = "byte budget"
)

// ErrLayoutMismatch: a stream, bucket or object store already exists with
// settings other than this process's. Errors of type *MismatchError match it.
var ErrLayoutMismatch = errors.New("existing JetStream resource has other settings")

// MismatchError names the resource and the setting that differ. Provision
// never changes an existing resource to match: one process with a stale or
// mistyped setting must not reconfigure a running deployment.
type MismatchError struct {
	Resource string // bucket or stream name, e.g. JOBGATE_JOBS
	Setting  string // e.g. SettingReplicas
	Have     string // what the deployment has
	Want     string // what this process is configured for
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s is %s on %s, but this process is configured for %s", e.Setting, e.Have, e.Resource, e.Want)
}

// Is makes a *MismatchError match ErrLayoutMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrLayoutMismatch }

// mismatchErrors is every difference Provision found, said once per
// setting with the resources it concerns, and what to do about it.
type mismatchErrors []*MismatchError

func (m mismatchErrors) Error() string {
	type diff struct{ setting, have, want string }
	var order []diff
	names := map[diff][]string{}
	for _, e := range m {
		d := diff{e.Setting, e.Have, e.Want}
		if _, ok := names[d]; !ok {
			order = append(order, d)
		}
		names[d] = append(names[d], e.Resource)
	}
	var b strings.Builder
	b.WriteString("the deployment's JetStream resources differ from this process's settings: ")
	for i, d := range order {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s is %s on %s, but this process is configured for %s", d.setting, d.have, strings.Join(names[d], ", "), d.want)
	}
	b.WriteString(". Every process of a deployment must use the same settings: fix this process's, or change the " +
		"deployment deliberately (e.g. `nats stream edit`), never by starting a process with other values")
	return b.String()
}

// Unwrap exposes each *MismatchError (errors.As) and so ErrLayoutMismatch.
func (m mismatchErrors) Unwrap() []error {
	out := make([]error, len(m))
	for i, e := range m {
		out[i] = e
	}
	return out
}

// Resources are what Provision (and Rebind, Bind) return: the handles on
// the provisioned streams and buckets, as typed adapters with methods whose
// errors are the domain's (job.ErrNotFound, job.ErrUnavailable, ...) and
// this package's (ErrExists, ErrStale, ErrWorkGone). No service takes them
// whole: each declares the small interfaces it consumes and takes them as
// a Stores of its own, and only the assembly (system) maps
// Resources to those.
type Resources struct {
	Jobs       *Store       // job records (JOBGATE_JOBS)
	Work       *WorkQueue   // work messages (JOBGATE_WORK)
	Events     *EventStream // job events (JOBGATE_EVENTS)
	Files      *ResultFiles // result files (JOBGATE_RESULTS)
	Secrets    *Secrets     // deployment secrets (JOBGATE_META)
	Notices    *Notices     // the notifier's send records (JOBGATE_NOTICES)
	Deliveries *Deliveries  // the notifier's pending deliveries (JOBGATE_DELIVERIES)
	Types      *TypeStore   // job type declarations and worker presence (JOBGATE_TYPES, JOBGATE_WORKERS)
	Slots      *SlotStore   // endpoint types' request slots (JOBGATE_SLOTS)
	Batches    *BatchStore  // batch records (JOBGATE_BATCHES)
	Schedule   *Schedule    // the scheduled set (JOBGATE_SCHEDULE)
	Layout     Layout

	// The raw handles, for the adapters of pkg/worker and for tests that
	// inspect streams. Services do not use them.
	JS      jetstream.JetStream
	Meta    jetstream.KeyValue
	Results jetstream.ObjectStore

	resultChunks *streamRef // the results' stream, for reading a put back
}

// Provision creates every stream, bucket and object store of the deployment
// that does not exist yet and returns handles on them. Any number of
// processes may call it at once: a resource is created by whichever comes
// first, and every caller then compares what exists with its own layout. A
// difference is an error naming the setting (errors.Is ErrLayoutMismatch),
// never a silent update. Transient cluster states (no meta leader yet, a
// stream electing its leader) are retried until ctx ends.
func Provision(ctx context.Context, js jetstream.JetStream, l Layout) (*Resources, error) {
	if err := l.validate(); err != nil {
		return nil, fmt.Errorf("provision: %w", err)
	}
	var mismatches []*MismatchError
	for _, r := range l.resources() {
		have, err := ensure(ctx, js, r)
		if err == nil {
			err = waitLeader(ctx, js, r.stream)
		}
		differ := r.compare(have)
		// Only a resource that matches is touched: a mismatch changes nothing.
		if err == nil && len(differ) == 0 && r.bucket && have.Replicas > 1 && have.AllowDirect {
			err = leaderReads(ctx, js, have)
		}
		if err == nil && len(differ) == 0 && (r.stream == StreamWork || r.stream == StreamEvents) && have.Replicas <= 1 && !have.AllowDirect {
			err = directReads(ctx, js, have) // a stream of an earlier version
		}
		if err != nil {
			return nil, fmt.Errorf("provision %s: %w", r.name, err)
		}
		mismatches = append(mismatches, differ...)
	}
	if len(mismatches) > 0 {
		return nil, fmt.Errorf("provision: %w", mismatchErrors(mismatches))
	}
	res, err := bind(ctx, js, true)
	if err != nil {
		return nil, fmt.Errorf("provision: %w", err)
	}
	res.Layout = l
	res.Jobs.ttl = l.JobTTL
	return res, nil
}

// Rebind returns handles on the resources of prov (what Provision
// returned) through another connection's js: one process's components each
// on a connection of their own.
func Rebind(ctx context.Context, js jetstream.JetStream, prov *Resources) (*Resources, error) {
	res, err := bind(ctx, js, true)
	if err != nil {
		return nil, fmt.Errorf("rebind: %w", err)
	}
	res.Layout = prov.Layout
	res.Jobs.ttl = prov.Jobs.ttl
	return res, nil
}

// Bind returns handles on the resources of a deployment that some other
// process provisioned, creating nothing and changing nothing: what a worker
// process with worker credentials does (it may not create streams). It
// waits, within ctx, for the deployment to be provisioned.
func Bind(ctx context.Context, js jetstream.JetStream) (*Resources, error) {
	for {
		res, err := bind(ctx, js, false)
		if err == nil {
			err = settled(ctx, res)
		}
		if err == nil {
			return res, nil
		}
		provisioning := errors.Is(err, errProvisioning)
		if !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) && !provisioning ||
			ctx.Err() != nil {
			return nil, fmt.Errorf("bind: %w", err)
		}
		select {
		case <-ctx.Done():
			if provisioning {
				return nil, fmt.Errorf("bind: the deployment's JetStream resources are still being provisioned: %w", err)
			}
			return nil, fmt.Errorf("bind: the deployment's JetStream resources do not exist (is a jobgate server running against this NATS?): %w", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// errProvisioning: a bucket exists but its provisioner has not finished
// setting it up.
var errProvisioning = errors.New("provisioning not finished")

// settled refreshes what bind's handles know of their backing streams and
// returns errProvisioning while a replicated bucket still allows direct
// gets: a provisioner created it (the client creates every bucket so) and
// has not yet made it read from its leader (leaderReads). A handle keeps
// the stream configuration it last read and reads by direct get while that
// allows them; once the provisioner turns them off no server answers
// them, and a handle opened in between would meet "no responders" on every
// read for the life of its process (a worker started with a fresh
// deployment stored no result at all).
func settled(ctx context.Context, res *Resources) error {
	type status interface {
		StreamInfo() *jetstream.StreamInfo
	}
	type handle struct {
		name   string
		status func(context.Context) (any, error)
	}
	kv := func(name string, h jetstream.KeyValue) handle {
		return handle{name, func(ctx context.Context) (any, error) { return h.Status(ctx) }}
	}
	handles := []handle{
		kv(BucketJobs, res.Jobs.kv), kv(BucketTypes, res.Types.types), kv(BucketWorkers, res.Types.workers),
		{BucketResults, func(ctx context.Context) (any, error) { return res.Results.Status(ctx) }},
	}
	for _, h := range handles {
		var st any
		err := retryTransient(ctx, func(ctx context.Context) (err error) {
			st, err = h.status(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", h.name, err)
		}
		s, ok := st.(status)
		if !ok || s.StreamInfo() == nil {
			continue
		}
		if cfg := s.StreamInfo().Config; cfg.Replicas > 1 && cfg.AllowDirect {
			return fmt.Errorf("%s: %w", h.name, errProvisioning)
		}
	}
	return nil
}

// bind opens every bucket; all also opens the ones only services use.
func bind(ctx context.Context, js jetstream.JetStream, all bool) (*Resources, error) {
	res := &Resources{JS: js, Types: &TypeStore{}}
	var jobs, notices, batches, slots jetstream.KeyValue
	buckets := []struct {
		bucket string
		dst    *jetstream.KeyValue
	}{{BucketJobs, &jobs}, {BucketTypes, &res.Types.types}, {BucketWorkers, &res.Types.workers}}
	if all {
		buckets = append(buckets, []struct {
			bucket string
			dst    *jetstream.KeyValue
		}{{BucketMeta, &res.Meta}, {BucketNotices, &notices}, {BucketBatches, &batches}, {BucketSlots, &slots}}...)
	}
	for _, o := range buckets {
		err := retryTransient(ctx, func(ctx context.Context) (err error) {
			*o.dst, err = js.KeyValue(ctx, o.bucket)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.bucket, err)
		}
	}
	err := retryTransient(ctx, func(ctx context.Context) (err error) {
		res.Results, err = js.ObjectStore(ctx, BucketResults)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", BucketResults, err)
	}
	res.Jobs = &Store{kv: jobs, nc: js.Conn(), js: js}
	res.Work, res.Events = NewWorkQueue(js), NewEventStream(js)
	res.resultChunks = newStreamRef(js, "OBJ_"+BucketResults)
	res.Files = NewResultFiles(res.Results)
	if all {
		res.Secrets, res.Notices = NewSecrets(res.Meta), NewNotices(notices)
		res.Deliveries = NewDeliveries(js)
		res.Batches = newBatchStore(js, batches)
		res.Slots = &SlotStore{kv: slots}
		res.Schedule = NewSchedule(js)
	}
	return res, nil
}

// resource is one stream, bucket or object store: how to create it and what
// its backing stream must look like.
type resource struct {
	name   string // as users know it (bucket or stream name)
	stream string // the backing stream
	bucket bool   // a KV bucket or object store (read by direct gets)
	create func(context.Context, jetstream.JetStream) error
	want   expect
}

// expect lists the backing stream settings that matter; zero values are
// not checked.
type expect struct {
	replicas   int
	maxAge     time.Duration
	ageSetting string
	duplicates time.Duration
	history    int64
	retention  *jetstream.RetentionPolicy
	subjects   []string
	markerTTL  time.Duration
	maxBytes   int64
	bytesName  string // the setting maxBytes comes from
}

func (l Layout) resources() []resource {
	workQueue, limits := jetstream.WorkQueuePolicy, jetstream.LimitsPolicy
	jobsKV := jetstream.KeyValueConfig{
		Bucket:         BucketJobs,
		Description:    "jobgate job records: idempotency and status in one document",
		History:        1,
		TTL:            l.JobTTL,
		LimitMarkerTTL: time.Minute,
		MaxBytes:       l.StoreMaxBytes,
		Replicas:       l.Replicas,
		Storage:        jetstream.FileStorage,
	}
	metaKV := jetstream.KeyValueConfig{
		Bucket: BucketMeta, Description: "jobgate deployment secrets", History: 1,
		MaxBytes: smallBucketBytes, Replicas: l.Replicas, Storage: jetstream.FileStorage,
	}
	noticesKV := jetstream.KeyValueConfig{
		Bucket: BucketNotices, Description: "jobgate notifier send records", History: 1,
		TTL: l.JobTTL, MaxBytes: l.StoreMaxBytes, Replicas: l.Replicas, Storage: jetstream.FileStorage,
	}
	work := jetstream.StreamConfig{
		Name:        StreamWork,
		Description: "jobgate work queue",
		Subjects:    []string{AllWork},
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  l.DuplicateWindow,
		MaxAge:      l.JobTTL,
		// The brokers read work (a lane's oldest message, a deferred one
		// by sequence) by direct get on one server. On a cluster a
		// follower behind its leader would answer "no such message" for a
		// deferred one, which would then not be looked at again: there
		// the leader answers, as for the buckets (leaderReads).
		AllowDirect: l.Replicas <= 1,
		Replicas:    l.Replicas,
		Storage:     jetstream.FileStorage,
		MaxBytes:    l.StoreMaxBytes,
		Discard:     jetstream.DiscardNew,
	}
	events := jetstream.StreamConfig{
		Name:        StreamEvents,
		Description: "jobgate job state changes",
		Subjects:    []string{AllEvents},
		Retention:   jetstream.LimitsPolicy,
		// A job's newest event is read before each in-order publish (the
		// publish itself checks it): by direct get on one server, from the
		// leader on a cluster, as the work (above).
		AllowDirect: l.Replicas <= 1,
		Duplicates:  l.DuplicateWindow,
		MaxAge:      l.EventsMaxAge,
		Replicas:    l.Replicas,
		Storage:     jetstream.FileStorage,
		MaxBytes:    l.StoreMaxBytes,
		Discard:     jetstream.DiscardNew,
	}
	// Pending deliveries live no longer than the events they deliver.
	deliveries := jetstream.StreamConfig{
		Name:        StreamDeliveries,
		Description: "jobgate notifier: pending deliveries, one subject tree and consumer per destination",
		Subjects:    []string{AllDeliveries},
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  l.DuplicateWindow,
		MaxAge:      l.EventsMaxAge,
		Replicas:    l.Replicas,
		Storage:     jetstream.FileStorage,
		MaxBytes:    l.StoreMaxBytes,
		Discard:     jetstream.DiscardNew,
	}
	// The scheduled set: entries live no longer than their jobs, and are
	// read by direct get by subject (from the leader on a cluster, as the
	// work above).
	schedule := jetstream.StreamConfig{
		Name:        StreamSchedule,
		Description: "jobgate scheduled jobs: an entry per job with a run_at ahead, one subject per minute",
		Subjects:    []string{schedulePrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		AllowDirect: l.Replicas <= 1,
		Duplicates:  l.DuplicateWindow,
		MaxAge:      l.JobTTL,
		Replicas:    l.Replicas,
		Storage:     jetstream.FileStorage,
		MaxBytes:    l.scheduleBytes(),
		Discard:     jetstream.DiscardNew,
	}
	typesKV := jetstream.KeyValueConfig{
		Bucket: BucketTypes, Description: "jobgate job types, declared by their workers", History: 1,
		MaxBytes: smallBucketBytes, Replicas: l.Replicas, Storage: jetstream.FileStorage,
	}
	workersKV := jetstream.KeyValueConfig{
		Bucket: BucketWorkers, Description: "jobgate live worker processes per job type", History: 1,
		TTL: PresenceTTL, LimitMarkerTTL: time.Minute, MaxBytes: smallBucketBytes, Replicas: l.Replicas, Storage: jetstream.FileStorage,
	}
	slotsKV := jetstream.KeyValueConfig{
		Bucket: BucketSlots, Description: "jobgate endpoint types' request slots, leased", History: 1,
		TTL: SlotTTL, MaxBytes: smallBucketBytes, Replicas: l.Replicas, Storage: jetstream.FileStorage,
	}
	results := jetstream.ObjectStoreConfig{
		Bucket: BucketResults, Description: "jobgate rendered results",
		TTL: l.ResultTTL, MaxBytes: l.ResultsMaxBytes, Replicas: l.Replicas, Storage: jetstream.FileStorage,
	}
	kv := func(c jetstream.KeyValueConfig) func(context.Context, jetstream.JetStream) error {
		return func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.CreateKeyValue(ctx, c)
			return err
		}
	}
	stream := func(c jetstream.StreamConfig) func(context.Context, jetstream.JetStream) error {
		return func(ctx context.Context, js jetstream.JetStream) error { _, err := js.CreateStream(ctx, c); return err }
	}
	return []resource{
		{name: BucketJobs, bucket: true, stream: "KV_" + BucketJobs, create: kv(jobsKV), want: expect{
			replicas: l.Replicas, maxAge: l.JobTTL, ageSetting: SettingJobTTL, history: 1, markerTTL: time.Minute, maxBytes: l.StoreMaxBytes, bytesName: SettingStoreBytes}},
		{name: BucketMeta, bucket: true, stream: "KV_" + BucketMeta, create: kv(metaKV), want: expect{
			replicas: l.Replicas, history: 1, maxBytes: smallBucketBytes, bytesName: settingSmallBytes}},
		{name: BucketNotices, bucket: true, stream: "KV_" + BucketNotices, create: kv(noticesKV), want: expect{
			replicas: l.Replicas, maxAge: l.JobTTL, ageSetting: SettingJobTTL, history: 1, maxBytes: l.StoreMaxBytes, bytesName: SettingStoreBytes}},
		{name: BucketTypes, bucket: true, stream: "KV_" + BucketTypes, create: kv(typesKV), want: expect{
			replicas: l.Replicas, history: 1, maxBytes: smallBucketBytes, bytesName: settingSmallBytes}},
		{name: BucketWorkers, bucket: true, stream: "KV_" + BucketWorkers, create: kv(workersKV), want: expect{
			replicas: l.Replicas, maxAge: PresenceTTL, ageSetting: "worker presence TTL", history: 1, markerTTL: time.Minute, maxBytes: smallBucketBytes, bytesName: settingSmallBytes}},
		{name: BucketSlots, bucket: true, stream: "KV_" + BucketSlots, create: kv(slotsKV), want: expect{
			replicas: l.Replicas, maxAge: SlotTTL, ageSetting: "endpoint slot lease TTL", history: 1, maxBytes: smallBucketBytes, bytesName: settingSmallBytes}},
		{name: StreamWork, stream: StreamWork, create: stream(work), want: expect{
			replicas: l.Replicas, maxAge: l.JobTTL, ageSetting: SettingJobTTL, duplicates: l.DuplicateWindow,
			retention: &workQueue, subjects: work.Subjects, maxBytes: l.StoreMaxBytes, bytesName: SettingStoreBytes}},
		{name: StreamEvents, stream: StreamEvents, create: stream(events), want: expect{
			replicas: l.Replicas, maxAge: l.EventsMaxAge, ageSetting: settingEventsAge, duplicates: l.DuplicateWindow,
			retention: &limits, subjects: events.Subjects, maxBytes: l.StoreMaxBytes, bytesName: SettingStoreBytes}},
		{name: StreamDeliveries, stream: StreamDeliveries, create: stream(deliveries), want: expect{
			replicas: l.Replicas, maxAge: l.EventsMaxAge, ageSetting: settingEventsAge, duplicates: l.DuplicateWindow,
			retention: &workQueue, subjects: deliveries.Subjects, maxBytes: l.StoreMaxBytes, bytesName: SettingStoreBytes}},
		{name: StreamSchedule, stream: StreamSchedule, create: stream(schedule), want: expect{
			replicas: l.Replicas, maxAge: l.JobTTL, ageSetting: SettingJobTTL, duplicates: l.DuplicateWindow,
			retention: &limits, subjects: schedule.Subjects, maxBytes: l.scheduleBytes(), bytesName: SettingStoreBytes}},
		l.batchesResource(),
		{name: BucketResults, bucket: true, stream: "OBJ_" + BucketResults, create: func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.CreateObjectStore(ctx, results)
			return err
		}, want: expect{replicas: l.Replicas, maxAge: l.ResultTTL, ageSetting: SettingResultTTL, maxBytes: l.ResultsMaxBytes, bytesName: SettingResultsBytes}},
	}
}

// ensure returns the config of the resource's backing stream, creating the
// resource first when it does not exist. A create that loses a race against
// another process (or finds a different config) reads what exists instead.
// On a cluster the server that answers a read may learn of a stream a moment
// after its creation was confirmed: reads are repeated, with a growing pause,
// until the stream shows up or ctx ends.
func ensure(ctx context.Context, js jetstream.JetStream, r resource) (jetstream.StreamConfig, error) {
	var cfg jetstream.StreamConfig
	wait := 25 * time.Millisecond
	for {
		var s jetstream.Stream
		err := retryTransient(ctx, func(ctx context.Context) (err error) { s, err = js.Stream(ctx, r.stream); return err })
		if err == nil {
			return s.CachedInfo().Config, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return cfg, mapErr(err)
		}
		// Creating an identical stream again is a no-op, so a create whose
		// result is not visible yet may safely be repeated.
		err = retryTransient(ctx, func(ctx context.Context) error { return r.create(ctx, js) })
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && !errors.Is(err, jetstream.ErrBucketExists) {
			// Creates racing for one resource may each be counted against
			// the server's storage until one of them wins: if the
			// resource exists now, the refusal was the race's.
			if storageRefused(err) {
				if have, ok := raced(ctx, js, r.stream); ok {
					return have, nil
				}
			}
			return cfg, explainCreate(err, r)
		}
		select {
		case <-ctx.Done():
			return cfg, fmt.Errorf("%w: %s created but not readable: %w", job.ErrUnavailable, r.stream, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// waitLeader polls until the stream has a leader. On a cluster a stream
// that was just created (or lost its leader with a node) answers no reads
// or writes until it has one; a process should not start serving before.
func waitLeader(ctx context.Context, js jetstream.JetStream, name string) error {
	wait := 25 * time.Millisecond
	for {
		var s jetstream.Stream
		err := retryTransient(ctx, func(ctx context.Context) (err error) { s, err = js.Stream(ctx, name); return err })
		if err != nil {
			return mapErr(err)
		}
		if ci := s.CachedInfo().Cluster; ci == nil || ci.Leader != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s has no leader: %w", job.ErrUnavailable, name, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// leaderReads turns direct gets off on a replicated bucket's stream, so that
// every read is answered by the stream leader. With direct gets any replica
// answers, and a follower that has not yet applied the latest write returns
// "not found" for a record just created or an older revision of one just
// changed (see nats-server issue 4710). jobgate decides on what it reads — a
// renderer acknowledges work whose record it does not find, a gateway
// replays what it reads — so it reads what was acknowledged. With one
// replica there is no follower, and direct gets stay on.
func leaderReads(ctx context.Context, js jetstream.JetStream, have jetstream.StreamConfig) error {
	return setDirect(ctx, js, have, false)
}

// directReads turns direct gets on for a stream whose readers can take a
// follower's stale answer.
func directReads(ctx context.Context, js jetstream.JetStream, have jetstream.StreamConfig) error {
	return setDirect(ctx, js, have, true)
}

func setDirect(ctx context.Context, js jetstream.JetStream, have jetstream.StreamConfig, on bool) error {
	cfg := have
	cfg.AllowDirect = on
	return retryTransient(ctx, func(ctx context.Context) error {
		_, err := js.UpdateStream(ctx, cfg)
		return err
	})
}

// explainCreate adds what an operator needs to a create error that is not
// transient.
func explainCreate(err error, r resource) error {
	var api *jetstream.APIError
	if storageRefused(err) {
		return fmt.Errorf("%s's byte budget (%d) does not fit in the JetStream storage the NATS server has left "+
			"(max_file_store); lower %s or %s, or give the server more: %w", r.name, r.want.maxBytes, SettingStoreBytes, SettingResultsBytes, err)
	}
	if errors.As(err, &api) && api.ErrorCode == 10074 { // replicas > 1 not supported in non-clustered mode
		return fmt.Errorf("%d replicas need a JetStream cluster of at least %d servers; set %s to 1 for a single server: %w",
			r.want.replicas, r.want.replicas, SettingReplicas, err)
	}
	return mapErr(err)
}

// raced reads the stream a racing create may have made, a few times over
// a moment.
func raced(ctx context.Context, js jetstream.JetStream, name string) (jetstream.StreamConfig, bool) {
	for range 5 {
		if s, err := js.Stream(ctx, name); err == nil {
			return s.CachedInfo().Config, true
		}
		select {
		case <-ctx.Done():
			return jetstream.StreamConfig{}, false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return jetstream.StreamConfig{}, false
}

// storageRefused reports JetStream refusing a resource whose byte budget
// the server's storage cannot grant (insufficient storage resources).
func storageRefused(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == 10047
}

// compare reports every setting of the existing backing stream that differs
// from the layout.
func (r resource) compare(have jetstream.StreamConfig) []*MismatchError {
	var out []*MismatchError
	differ := func(setting, h, w string) {
		out = append(out, &MismatchError{Resource: r.name, Setting: setting, Have: h, Want: w})
	}
	w := r.want
	if have.Replicas != w.replicas && !(have.Replicas == 0 && w.replicas == 1) {
		differ(SettingReplicas, fmt.Sprint(have.Replicas), fmt.Sprint(w.replicas))
	}
	if have.Storage != jetstream.FileStorage {
		differ(settingStorage, have.Storage.String(), jetstream.FileStorage.String())
	}
	if have.MaxAge != w.maxAge {
		setting := w.ageSetting
		if setting == "" {
			setting = "max age"
		}
		differ(setting, durationOrNone(have.MaxAge), durationOrNone(w.maxAge))
	}
	if w.duplicates != 0 && have.Duplicates != w.duplicates {
		differ(settingDupWindow, have.Duplicates.String(), w.duplicates.String())
	}
	if w.history != 0 && have.MaxMsgsPerSubject != w.history {
		differ(settingHistory, fmt.Sprint(have.MaxMsgsPerSubject), fmt.Sprint(w.history))
	}
	if w.retention != nil && have.Retention != *w.retention {
		differ(settingRetention, have.Retention.String(), w.retention.String())
	}
	if w.subjects != nil && fmt.Sprint(have.Subjects) != fmt.Sprint(w.subjects) {
		differ(settingSubjects, fmt.Sprint(have.Subjects), fmt.Sprint(w.subjects))
	}
	// A resource an earlier version created has no budget (unlimited): it
	// is accepted as it is, and an operator gives it one deliberately
	// (docs/operations.md); a budget other than the layout's is a mismatch.
	if w.maxBytes != 0 && have.MaxBytes > 0 && have.MaxBytes != w.maxBytes {
		differ(w.bytesName, fmt.Sprint(have.MaxBytes), fmt.Sprint(w.maxBytes))
	}
	if w.markerTTL != 0 && (have.SubjectDeleteMarkerTTL != w.markerTTL || !have.AllowMsgTTL) {
		differ(settingMarkerTTL, durationOrNone(have.SubjectDeleteMarkerTTL), w.markerTTL.String())
	}
	return out
}

func durationOrNone(d time.Duration) string {
	if d == 0 {
		return "none (unlimited)"
	}
	return d.String()
}

// retryTransient runs op until it succeeds, fails for good, or ctx ends.
// A cluster that has just started answers "temporarily unavailable" or finds
// too few peers until its servers have met and elected their leaders, and
// while several processes create the same streams at once an API request
// now and then goes unanswered: each try gets its own short deadline.
func retryTransient(ctx context.Context, op func(ctx context.Context) error) error {
	return retry.Until(ctx, retry.Policy{First: 100 * time.Millisecond, Limit: time.Second, Try: provisionTry,
		Retryable: transientCluster}, op)
}

// provisionTry bounds one JetStream API request of Provision.
const provisionTry = 3 * time.Second

// transientCluster reports errors that a forming or recovering cluster
// outgrows: everything Unavailable covers plus "no suitable peers" and
// "insufficient resources" while servers are still joining.
func transientCluster(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if Unavailable(err) { // a try's own deadline included
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == 10005 || api.ErrorCode == 10023) // no suitable peers, insufficient resources
}
