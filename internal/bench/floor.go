package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runFloor measures the raw floor: exactly the JetStream operations one
// admission needs — the create-only commit of a record of the same size (with
// the bucket's per-key TTL) and the work publish with its Nats-Msg-Id — from
// clients goroutines on the same connection the gateway uses, for d.
func runFloor(ctx context.Context, res *natsjs.Resources, tenant string, clients int, d time.Duration) (Samples, error) {
	if res == nil {
		return Samples{}, errors.New("floor: no JetStream resources in this process")
	}
	if clients < 1 || d <= 0 {
		return Samples{}, errors.New("floor: clients and duration must be positive")
	}
	if tenant == "" {
		tenant = "floor"
	}
	kv := res.Jobs.KV()
	ttl := jetstream.KeyTTL(res.Layout.JobTTL)
	now := time.Now().UTC()
	// A record as admission writes it, so the bytes per commit match.
	tmpl := &job.Record{
		ID: "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", Tenant: tenant, Requester: "floor-00", KeyHash: "0123456789abcdef",
		Fingerprint: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Type: "permit_report",
		Params: []byte(`{"case_id":47,"pages":1,"revision":29}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now,
	}
	data, err := codec.MarshalRecord(tmpl)
	if err != nil {
		return Samples{}, err
	}
	recs := make([]*recorder, clients)
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range clients {
		rec := &recorder{}
		recs[w] = rec
		requester := "floor-" + strconv.Itoa(w)
		wg.Go(func() {
			buf := make([]byte, 0, 64)
			for n := 0; time.Now().Before(deadline); n++ {
				// Unique across rounds too: a repeated Nats-Msg-Id would be a
				// de-duplicated publish, cheaper than a stored one.
				buf = strconv.AppendInt(append(append(buf[:0], "job_"...), tenant...), int64(w*10_000_000+n), 10)
				id := string(buf)
				key := job.StoreKey(tenant, requester, id)
				t0 := time.Now()
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := kv.Create(cctx, key, data, ttl)
				if err == nil {
					msg := &nats.Msg{Subject: natsjs.WorkSubject("permit_report", tenant, requester, id), Data: []byte(key), Header: nats.Header{}}
					msg.Header.Set(jetstream.MsgIDHeader, id)
					_, err = res.JS.PublishMsg(cctx, msg)
				}
				cancel()
				if err != nil {
					rec.fail(fmt.Sprintf("floor: %v", err))
					if ctx.Err() != nil {
						return
					}
					continue
				}
				rec.lat = append(rec.lat, time.Since(t0))
			}
		})
	}
	wg.Wait()
	return collect(recs, time.Since(start)), nil
}
