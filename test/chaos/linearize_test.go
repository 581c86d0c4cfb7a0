package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The linearizability check over the healthy histories finds nothing, and
// its partitions cover every key, batch item and call.
func TestLinearizableHealthyHistories(t *testing.T) {
	for name, es := range map[string][]Entry{"single": healthy(), "batches": healthyBatches()} {
		rep := Check(es, time.Minute, false)
		require.NotContains(t, rep.AnomalyKinds(), "not-linearizable", "%s: %s", name, rep.String())
		require.Contains(t, rep.String(), "linearizability (Porcupine, key→job register)", name)
	}
	rep := Check(healthy(), time.Minute, false)
	// k-1-1: 4 submissions (the 503 included), 7 reads of job_1 and the
	// final one.
	require.Contains(t, rep.String(), "1 partitions, 12 operations")
}

// Histories in which a call without an answer took effect, or did not,
// are linearizable either way: the check never mistakes a lost answer for
// a lie.
func TestLinearizableLostAnswers(t *testing.T) {
	const j = "job_1"
	for name, plant := range map[string][]Entry{
		// The only 202 was lost; the replay names the job it created.
		"created by a lost call": {
			{Kind: "submit", Requester: "bob", Key: "k-9", Probe: "new", Gateway: "g1", Start: at0(2), End: at0(2.5), Err: "timeout"},
			{Kind: "submit", Requester: "bob", Key: "k-9", Probe: "new", Gateway: "g2", Start: at0(3), End: at0(3.1), Status: 200, Replayed: true, Job: "job_9", State: "queued", Rev: 3},
		},
		// The lost call did nothing (or came after): a later call creates.
		"a lost call that did nothing": {
			{Kind: "submit", Requester: "bob", Key: "k-9", Probe: "new", Gateway: "g1", Start: at0(2), End: at0(2.5), Status: 503},
			{Kind: "submit", Requester: "bob", Key: "k-9", Probe: "new", Gateway: "g2", Start: at0(3), End: at0(3.1), Status: 202, Job: "job_9", State: "queued", Rev: 3},
			{Kind: "obs", Via: "poll", Job: "job_9", Gateway: "g1", Start: at0(3.2), End: at0(3.3), Status: 200, State: "queued", Rev: 3},
		},
		// Two reads at once may answer in either order.
		"concurrent reads": {
			{Kind: "obs", Via: "poll", Job: j, Gateway: "g1", Start: at0(3.3), End: at0(3.9), Status: 200, State: "queued", Rev: 5},
		},
	} {
		es := append(healthy(), plant...)
		rep := Check(es, time.Minute, false)
		require.NotContains(t, rep.AnomalyKinds(), "not-linearizable", "%s: %s", name, rep.String())
	}
}

// Each lie a replica that answers without its leader (or an admission that
// skips its create-only check) could tell, planted in the healthy history,
// has no linearization. Some are named by the pairwise checks too; the
// model catches each of them alone.
func TestLinearizabilityCatchesLies(t *testing.T) {
	const j = "job_1"
	for name, plant := range map[string][]Entry{
		// An admission that read the key from a replica that had not seen
		// the create, and created again.
		"a second 202 for the key": {
			{Kind: "submit", Requester: "alice", Key: "k-1-1", Probe: "replay", Gateway: "g1", Start: at0(6.5), End: at0(6.6), Status: 202, Job: j, State: "succeeded", Attempt: 1, Rev: 8},
		},
		"a replay naming another job": {
			{Kind: "submit", Requester: "alice", Key: "k-1-1", Probe: "replay", Gateway: "g2", Start: at0(6.5), End: at0(6.6), Status: 200, Replayed: true, Job: "job_2", State: "succeeded", Attempt: 1, Rev: 8},
		},
		// A read from a replica behind the create: the acknowledged job
		// is not found.
		"404 after the 202": {
			{Kind: "obs", Via: "poll", Job: j, Gateway: "g2", Start: at0(5.5), End: at0(5.6), Status: 404},
		},
		// A read from a replica behind the leader: an older revision after
		// a newer one was answered.
		"a stale read": {
			{Kind: "obs", Via: "poll", Job: j, Gateway: "g2", Start: at0(5.5), End: at0(5.6), Status: 200, State: "running", Attempt: 1, Rev: 6},
		},
		"a replay older than a read": {
			{Kind: "submit", Requester: "alice", Key: "k-1-1", Probe: "replay", Gateway: "g2", Start: at0(5.5), End: at0(5.6), Status: 200, Replayed: true, Job: j, State: "queued", Rev: 5},
		},
		"another body admitted": {
			{Kind: "submit", Requester: "alice", Key: "k-1-1", Probe: "conflict", Gateway: "g1", Start: at0(7.5), End: at0(7.6), Status: 200, Replayed: true, Job: j, State: "succeeded", Attempt: 1, Rev: 8},
		},
		// The final record is behind what a reader was answered before it.
		"a terminal state that changed": {
			{Kind: "obs", Via: "poll", Job: j, Gateway: "g1", Start: at0(7.2), End: at0(7.3), Status: 200, State: "canceled", Attempt: 1, Rev: 9},
		},
	} {
		t.Run(name, func(t *testing.T) {
			es := append(healthy(), plant...)
			rep := Check(es, time.Minute, false)
			require.Contains(t, rep.AnomalyKinds(), "not-linearizable", rep.String())
		})
	}
}

// Porcupine sees the same lie in a batch item's reads.
func TestLinearizabilityCatchesABatchItemRead(t *testing.T) {
	es := append(healthyBatches(),
		Entry{Kind: "obs", Via: "poll", Job: "job_b1", Gateway: "g1", Start: at0(2.6), End: at0(2.7), Status: 404})
	rep := Check(es, time.Minute, false)
	require.Contains(t, rep.AnomalyKinds(), "not-linearizable", rep.String())
	require.Contains(t, rep.String(), "batch item job_b1")
}
