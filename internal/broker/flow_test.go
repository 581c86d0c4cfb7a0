package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

// declareFlow declares a type whose params hold a customer, with flow.
func (tb *testBundle) declareFlow(t *testing.T, name string, flow api.Flow) {
	t.Helper()
	r := tb.ask(t, credA, name, wire.OpDeclare, wire.DeclareRequest{Worker: "w", Type: wire.Declaration{
		Name: name, Schema: json.RawMessage(`{"type":"object","properties":{"customer":{"type":"string","maxLength":16}},"additionalProperties":false}`),
		TimeoutSeconds: 60, Attempts: 2, MaxResultBytes: 1 << 20, ContentType: "text/plain", Flow: flow,
	}})
	require.Nil(t, r.Error, "declared")
}

// admitJob admits a job of typ for tenant with params and priority, and
// publishes its work as the relay does.
func (tb *testBundle) admitJob(t *testing.T, typ, tenant, key, params string, priority int) *job.Record {
	t.Helper()
	now := time.Now().UTC()
	rec := &job.Record{ID: job.DeriveID(tb.env.Secret, tenant, "reviewer-47", key), Tenant: tenant, Requester: "reviewer-47",
		KeyHash: job.HashKey(key), Fingerprint: "f-" + key, Type: typ, Params: json.RawMessage(params), Priority: priority,
		State: job.StateQueued, CreatedAt: now, UpdatedAt: now, MaxAttempts: 2, TimeoutSeconds: 60}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tb.conn.Res.Jobs.Create(ctx, rec))
	require.NoError(t, tb.conn.Res.Work.Publish(ctx, rec, 0))
	return rec
}

// span is one attempt as its worker saw it: from the claim's answer to
// the done request's sending.
type span struct {
	customer   string
	start, end time.Time
}

// A concurrency key's limit of 1 holds across two brokers answering the
// same workers under load: every start and end is recorded, no two jobs
// of one customer ever run at once, and the customers run beside each
// other (the key limits a customer, not the type).
func TestConcurrencyKeyLimitHoldsAcrossTwoBrokers(t *testing.T) {
	_, tb := setup(t)
	tb.broker(t, true) // a second broker in the queue group: requests go to either
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "/params/customer", Limit: 1}}})
	customers := []string{"c1", "c2", "c3"}
	const perCustomer = 8
	params := map[string]string{}
	for i := range perCustomer {
		for _, c := range customers {
			rec := tb.admitJob(t, "export", "4", fmt.Sprintf("%s-%d", c, i), `{"customer":"`+c+`"}`, 0)
			params[rec.Key()] = c
		}
	}
	var mu sync.Mutex
	var spans []span
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				finished := len(spans) == perCustomer*len(customers)
				mu.Unlock()
				if finished {
					return
				}
				r := tb.ask(t, credA, "export", wire.OpNext, wire.NextRequest{Worker: fmt.Sprintf("w%d", w), WaitMS: 500})
				if r.Error != nil || r.Job == nil {
					continue
				}
				s := span{customer: params[r.Job.Key], start: time.Now()}
				time.Sleep(time.Duration(20+rand.IntN(30)) * time.Millisecond) // the attempt's work
				s.end = time.Now()
				d := tb.ask(t, credA, "export", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: r.Job.Key, Token: r.Job.Token}})
				require.Nil(t, d.Error)
				mu.Lock()
				spans = append(spans, s)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, spans, perCustomer*len(customers), "every job ran")
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	overlapAcross := false
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if b.start.After(a.end) {
				break
			}
			require.NotEqual(t, a.customer, b.customer, "two jobs of customer %s ran at once: %v–%v and %v–%v", a.customer, a.start, a.end, b.start, b.end)
			overlapAcross = true
		}
	}
	require.True(t, overlapAcross, "different customers ran beside each other")
	// Every place was given back: no customer's entry holds one.
	for _, c := range customers {
		k := concurrencyKey("export", api.ConcurrencyKey{Key: "/params/customer", Limit: 1},
			&job.Record{Tenant: "4", Params: json.RawMessage(`{"customer":"` + c + `"}`)})
		n, err := tb.conn.Res.Slots.Leased(ctx, k.key, time.Now())
		require.NoError(t, err)
		require.Zero(t, n, "customer %s's place was given back", c)
	}
}

// A place whose holder died without giving it back (its broker took it
// and stopped before writing the claim) comes back within SlotTTL: the
// job it would have started starts on the other broker within 30 s.
func TestConcurrencyPlaceComesBackAfterItsBrokerDies(t *testing.T) {
	first, tb := setup(t)
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	rec := tb.admitJob(t, "export", "4", "k-1", `{"customer":"c1"}`, 0)
	// The first broker takes the tenant's place and dies before its claim
	// is written: nothing gives the place back.
	died, over := make(chan struct{}), make(chan struct{})
	var once sync.Once
	first.beforeClaimWrite = func(string) {
		once.Do(func() {
			first.stores.Conn.Close() // as if the process were killed
			close(died)
			<-over // the request never ends while the test runs
		})
	}
	t.Cleanup(func() { close(over) }) // before the broker's Stop, which waits for it
	go func() { // its answer never comes
		data, _ := json.Marshal(wire.NextRequest{Worker: "w-dead", WaitMS: 2000})
		_, _ = tb.conn.NC.Request(wire.Subject(credA, "export", wire.OpNext), data, 15*time.Second)
	}()
	select {
	case <-died:
	case <-time.After(20 * time.Second):
		t.Fatal("the first broker never took the place")
	}
	k := concurrencyKey("export", api.ConcurrencyKey{Key: "tenant", Limit: 1}, rec)
	n, err := tb.conn.Res.Slots.Leased(context.Background(), k.key, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n, "the dead broker holds the tenant's place")
	began := time.Now()
	tb.broker(t, true)
	var a *wire.Assignment
	for a == nil && time.Since(began) < 40*time.Second {
		r := tb.ask(t, credA, "export", wire.OpNext, wire.NextRequest{Worker: "w-live", WaitMS: 2000})
		require.Nil(t, r.Error)
		a = r.Job
	}
	require.NotNil(t, a, "the job started on the live broker")
	require.Equal(t, rec.Key(), a.Key)
	took := time.Since(began)
	require.Less(t, took, 30*time.Second, "the place came back within 30 s")
	require.Greater(t, took, 10*time.Second, "the place was held until its lease ran out, not taken at once")
}
