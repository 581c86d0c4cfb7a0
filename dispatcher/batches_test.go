package dispatcher

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// unadmittedBatch commits a batch record of n permit_report jobs, as a
// gateway that died right after its commit leaves it.
func (b *testBundle) unadmittedBatch(t *testing.T, key string, n int) *job.BatchRecord {
	t.Helper()
	ids := job.NewIDDeriver([]byte("test-secret"))
	br := &job.BatchRecord{ID: ids.DeriveBatch("4", "reviewer-47", key), Tenant: "4", Requester: "reviewer-47",
		KeyHash: ids.KeyHash("4", "reviewer-47", key), Fingerprint: "f-" + key, CreatedAt: time.Now().UTC()}
	for i := range n {
		params, _ := json.Marshal(map[string]int{"case_id": i + 1, "revision": 1, "pages": 1})
		br.Items = append(br.Items, job.BatchItem{JobID: ids.DeriveItem("4", "reviewer-47", br.ID, i), Type: "permit_report",
			Params: params, Fingerprint: "item-" + key + "-" + string(rune('a'+i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.conn.Res.Batches.Create(ctx, br))
	return br
}

func (b *testBundle) startBatchRelay(t *testing.T) *BatchRelay {
	t.Helper()
	relayRes := b.env.Connect(t, "batch-relay").Res
	r, err := NewBatchRelay(BatchRelayConfig{Grace: 50 * time.Millisecond}, BatchRelayStores{Batches: relayRes.Batches, Items: relayRes.Jobs}, testLogger())
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// A committed batch none of whose jobs exists, or only some, is admitted
// by the batch relay: every item becomes its job once (the ones there
// already are not written again), the relay proper announces each and
// queues its work, and the batch is marked admitted. Another run creates
// nothing.
func TestBatchRelayAdmitsWhatItsGatewayLeftOut(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	br := b.unadmittedBatch(t, "b1", 12)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A gateway that got half way before it died.
	for i := range 6 {
		require.NoError(t, b.conn.Res.Jobs.Create(ctx, br.ItemRecord(i)))
	}
	before := map[string]uint64{}
	for i := range 6 {
		rec, err := b.conn.Res.Jobs.Get(ctx, br.ItemRecord(i).Key())
		require.NoError(t, err)
		before[rec.ID] = rec.Revision
	}
	b.startBatchRelay(t)

	require.Eventually(t, func() bool {
		cur, err := b.conn.Res.Batches.Get(ctx, br.Key())
		return err == nil && cur.AdmittedAt != nil
	}, 20*time.Second, 10*time.Millisecond, "the batch is marked admitted")
	for i := range br.Items {
		want := br.ItemRecord(i)
		rec := jobtest.WaitFor(t, b.conn.Res, want.Key(), 10*time.Second, func(*job.Record) bool { return true })
		require.Equal(t, want.Fingerprint, rec.Fingerprint)
		if rev, ok := before[rec.ID]; ok {
			require.Equal(t, rev, rec.Revision, "an item that existed is not written again")
		}
		require.Eventually(t, func() bool { return len(jobtest.Events(t, b.conn.Res, rec)) == 1 }, 10*time.Second, 10*time.Millisecond,
			"item %d: its admission is announced once", i)
	}
	created, err := natsjs.AdmitItems(ctx, b.conn.Res.Jobs, br, nil)
	require.NoError(t, err)
	require.Zero(t, created, "a second run creates nothing")
}
