package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The raw pipeline's own work queue and record bucket.
const (
	rawPipeStream = "BENCH_RAWPIPE"
	rawPipeBucket = "BENCH_RAWJOBS"
)

// PipeResult is one pipeline run: jobs inserted during the insert window and
// how long until the last of them was finished.
type PipeResult struct {
	Inserted  int64         `json:"inserted"`
	Finished  int64         `json:"finished"`
	Errors    int64         `json:"errors"`
	FirstErr  string        `json:"first_error,omitempty"`
	Insert    time.Duration `json:"insert_ns"`  // the insert window
	Elapsed   time.Duration `json:"elapsed_ns"` // first insert → last finish
	Stats     *PipeStats    `json:"stats,omitempty"`
	StatsDiff *PipeStats    `json:"stats_diff,omitempty"`
}

// runRawPipeline is the smallest job pipeline JetStream allows, the anchor
// of the pipeline section: inserters create the record create-only (the
// bucket's per-key TTL) and publish its work message (with Nats-Msg-Id and
// the record's revision in a header); workers pull one message at a time,
// CAS the record to succeeded at that revision and acknowledge. No claim,
// heartbeat, event or notice: five JetStream operations per job.
func runRawPipeline(ctx context.Context, res *natsjs.Resources, inserters, workers int, d time.Duration, round int) (PipeResult, error) {
	if res == nil {
		return PipeResult{}, errors.New("raw pipeline: no JetStream resources in this process")
	}
	js := res.JS
	// Its own bucket, configured like the jobs bucket: records in the
	// deployment's bucket would be relayed to bench_noop's queue.
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: rawPipeBucket, History: 1, TTL: res.Layout.JobTTL, LimitMarkerTTL: time.Minute, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return PipeResult{}, fmt.Errorf("raw pipeline bucket: %w", err)
	}
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: rawPipeStream, Subjects: []string{"benchraw.>"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		return PipeResult{}, fmt.Errorf("raw pipeline stream: %w", err)
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 10_000,
	})
	if err != nil {
		return PipeResult{}, fmt.Errorf("raw pipeline consumer: %w", err)
	}
	ttl := jetstream.KeyTTL(res.Layout.JobTTL)
	tenant := "rawpipe" + strconv.Itoa(round)
	now := time.Now().UTC()
	queued := &job.Record{
		ID: "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", Tenant: tenant, Requester: "raw-00", KeyHash: "0123456789abcdef",
		Fingerprint: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Type: NoopType,
		Params: []byte(`{"n":1}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now,
	}
	qdata, err := codec.MarshalRecord(queued)
	if err != nil {
		return PipeResult{}, err
	}
	done := queued.Clone()
	done.State, done.Attempt, done.StartedAt, done.FinishedAt = job.StateSucceeded, 1, &now, &now
	ddata, err := codec.MarshalRecord(done)
	if err != nil {
		return PipeResult{}, err
	}

	var inserted, finished, errs atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		if errs.Add(1) == 1 {
			firstErr.Store(err.Error())
		}
	}
	var lastFinish atomic.Int64
	wctx, stopWorkers := context.WithCancel(ctx)
	var wwg sync.WaitGroup
	for range workers {
		wwg.Go(func() {
			for wctx.Err() == nil {
				msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
				if err != nil {
					if !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) && wctx.Err() == nil {
						fail(err)
					}
					continue
				}
				rev, _ := strconv.ParseUint(msg.Headers().Get("Bench-Revision"), 10, 64)
				octx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err = kv.Update(octx, string(msg.Data()), ddata, rev)
				cancel()
				if err != nil {
					fail(err)
					_ = msg.Nak()
					continue
				}
				if err := msg.Ack(); err != nil {
					fail(err)
				}
				finished.Add(1)
				lastFinish.Store(time.Now().UnixNano())
			}
		})
	}
	start := time.Now()
	deadline := start.Add(d)
	var iwg sync.WaitGroup
	for w := range inserters {
		requester := "raw-" + strconv.Itoa(w)
		iwg.Go(func() {
			for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
				id := "job_" + tenant + "_" + strconv.Itoa(w*10_000_000+n) // unique across rounds (de-duplication)
				key := job.StoreKey(tenant, requester, id)
				octx, cancel := context.WithTimeout(ctx, 5*time.Second)
				rev, err := kv.Create(octx, key, qdata, ttl)
				if err == nil {
					msg := &nats.Msg{Subject: "benchraw." + tenant + "." + requester + "." + id, Data: []byte(key), Header: nats.Header{}}
					msg.Header.Set(jetstream.MsgIDHeader, id)
					msg.Header.Set("Bench-Revision", strconv.FormatUint(rev, 10))
					_, err = js.PublishMsg(octx, msg)
				}
				cancel()
				if err != nil {
					fail(err)
					continue
				}
				inserted.Add(1)
			}
		})
	}
	iwg.Wait()
	insert := time.Since(start)
	for wait := time.Now().Add(60 * time.Second); finished.Load() < inserted.Load() && time.Now().Before(wait); {
		time.Sleep(5 * time.Millisecond)
	}
	stopWorkers()
	wwg.Wait()
	out := PipeResult{Inserted: inserted.Load(), Finished: finished.Load(), Errors: errs.Load(), Insert: insert}
	if v, ok := firstErr.Load().(string); ok {
		out.FirstErr = v
	}
	if lf := lastFinish.Load(); lf > 0 {
		out.Elapsed = time.Unix(0, lf).Sub(start)
	}
	return out, nil
}

// PipeStats are counters of the target process at one moment: what it
// finished and what it sent to and received from NATS. The differences
// between two snapshots, divided by the jobs finished, are the operations
// per job.
type PipeStats struct {
	Succeeded int64  `json:"succeeded"` // bench_noop jobs finished by the target's worker
	ConnOut   uint64 `json:"conn_out"`  // messages the process's NATS connection sent (publishes, KV writes, API requests, acks)
	ConnIn    uint64 `json:"conn_in"`   // messages it received (replies, deliveries, watch updates)
	API       uint64 `json:"api"`       // JetStream API requests of the account (pulls, consumer and stream calls)
	// Streams holds each stream's last sequence: messages stored.
	Streams map[string]uint64 `json:"streams"`
	// ByConn holds ConnOut + ConnIn per connection name: where the
	// messages of a job go.
	ByConn map[string]uint64 `json:"by_conn,omitempty"`
}

func pipeStats(ctx context.Context, env TargetEnv) (*PipeStats, error) {
	ps := &PipeStats{Streams: map[string]uint64{}, ByConn: map[string]uint64{}}
	if env.Noop != nil {
		ps.Succeeded = env.Noop.succeeded.Load()
	}
	if env.Conns != nil {
		for _, nc := range env.Conns() {
			st := nc.Stats()
			ps.ConnOut += st.OutMsgs
			ps.ConnIn += st.InMsgs
			ps.ByConn[nc.Opts.Name] += st.OutMsgs + st.InMsgs
		}
	}
	if env.Res == nil {
		return ps, nil
	}
	ai, err := env.Res.JS.AccountInfo(ctx)
	if err != nil {
		return nil, err
	}
	ps.API = ai.API.Total
	l := env.Res.JS.ListStreams(ctx)
	for si := range l.Info() {
		ps.Streams[si.Config.Name] = si.State.LastSeq
	}
	return ps, l.Err()
}

// minus returns p − o.
func (p *PipeStats) minus(o *PipeStats) *PipeStats {
	d := &PipeStats{Succeeded: p.Succeeded - o.Succeeded, ConnOut: p.ConnOut - o.ConnOut, ConnIn: p.ConnIn - o.ConnIn,
		API: p.API - o.API, Streams: map[string]uint64{}, ByConn: map[string]uint64{}}
	for k, v := range p.Streams {
		if n := v - o.Streams[k]; n > 0 {
			d.Streams[k] = n
		}
	}
	for k, v := range p.ByConn {
		if n := v - o.ByConn[k]; n > 0 {
			d.ByConn[k] = n
		}
	}
	return d
}
