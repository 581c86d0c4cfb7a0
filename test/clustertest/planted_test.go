package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/test/chaos"
	"github.com/stretchr/testify/require"
)

// TestTheCheckerCatchesAPlantedDoubleAdmission runs a real cluster whose
// gateway 2 carries a planted bug (failpoint gateway.admit-unchecked): it
// admits a key it has not seen as if a lagging replica had told it the
// key was free, writing over the key's job. The calls are recorded as the
// chaos test records them and handed to its checker: the history of the
// healthy gateway is linearizable, and the first replay through the
// planted one is not.
func TestTheCheckerCatchesAPlantedDoubleAdmission(t *testing.T) {
	planted, err := failpoint.Parse(failpoint.GatewayAdmitUnchecked + "=error")
	require.NoError(t, err)
	d := setup(t, setupOptions{gatewayFailpoints: map[int]*failpoint.Set{1: planted}})
	c := d.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var history []chaos.Entry
	call := func(gw int, key, probe string, body []byte) answer {
		t.Helper()
		start := time.Now()
		a, err := c.post(ctx, d.urls[gw], key, body)
		require.NoError(t, err)
		history = append(history, chaos.Entry{Kind: "submit", Requester: requester, Key: key, Probe: probe, Gateway: d.urls[gw],
			Start: start, End: time.Now(), Status: a.status, Job: a.id, Replayed: a.replayed})
		return a
	}
	check := func() *chaos.Report {
		t.Helper()
		es := append([]chaos.Entry{{T: time.Now(), Kind: "phase", Phase: "start"}}, history...)
		for _, r := range d.allRecords(t) {
			es = append(es, chaos.Entry{T: time.Now(), Kind: "final-job", Job: r.ID, Requester: r.Requester, State: string(r.State), Rev: r.Revision, KeyHash: r.KeyHash})
		}
		return chaos.Check(append(es, chaos.Entry{T: time.Now(), Kind: "phase", Phase: "end"}), time.Minute, true)
	}

	keys := map[string]string{}
	for i := range 3 {
		key := fmt.Sprintf("planted-%d", i)
		a := call(0, key, "new", permitBody(700+i))
		require.Equal(t, 202, a.status)
		keys[key] = a.id
	}
	d.waitTerminal(t, keys, time.Minute)
	for i := range 3 {
		a := call(0, fmt.Sprintf("planted-%d", i), "replay", permitBody(700+i))
		require.Equal(t, 200, a.status)
	}
	healthy := check()
	require.NotContains(t, healthy.AnomalyKinds(), "not-linearizable", healthy.String())
	require.NotContains(t, healthy.AnomalyKinds(), "key-created-twice", healthy.String())

	// Through the planted gateway every replay is a second admission.
	for i := range 3 {
		a := call(1, fmt.Sprintf("planted-%d", i), "replay", permitBody(700+i))
		require.Equal(t, 202, a.status, "the planted bug did not fire")
	}
	rep := check()
	t.Log("\n" + rep.String())
	require.Equal(t, 3, rep.AnomalyKinds()["not-linearizable"], rep.String())
	require.Contains(t, rep.AnomalyKinds(), "key-created-twice")
	for _, id := range keys {
		r, err := d.obs.Jobs.Get(ctx, job.StoreKey(tenant, requester, id))
		require.NoError(t, err)
		require.NotEqual(t, job.StateSucceeded, r.State, "the planted admission wrote over job %s", id)
	}
}
