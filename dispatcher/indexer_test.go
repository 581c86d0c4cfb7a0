package dispatcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// The dispatcher lists every admitted job under its requester, newest
// first, also one that moved on before the dispatcher saw its creation, and
// a gateway can wait until the list holds every job committed before.
func TestIndexerListsEveryJob(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	var ids []string
	for i := range 5 {
		r := b.put(t, fmt.Sprintf("idx-%d", i), func(*job.Record) {})
		ids = append([]string{r.ID}, ids...)
	}
	moved := b.put(t, "idx-moved", running(1, "w", time.Now()))
	ids = append([]string{moved.ID}, ids...)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.Eventually(t, func() bool {
		p, err := b.conn.Res.Jobs.WaitForIndex(ctx, 0)
		return err == nil && p == natsjs.IndexCaughtUp
	}, 20*time.Second, 10*time.Millisecond)
	entries, err := b.conn.Res.Index.Page(ctx, "4", "reviewer-47", 0, 10)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.ID)
	}
	require.ElementsMatch(t, ids, got, "each job once")
	require.Len(t, got, len(ids))
}

// A job's later changes (running, progress, its end) cost the indexer no
// store read once it listed the job: at thousands of jobs a second the
// marker reads were a round trip per change.
func TestIndexerListsAJobWithoutReadingAgain(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	caughtUp := func() bool {
		p, err := b.conn.Res.Jobs.WaitForIndex(ctx, 0)
		return err == nil && p == natsjs.IndexCaughtUp
	}
	r := b.put(t, "idx-reads", func(*job.Record) {})
	require.Eventually(t, caughtUp, 20*time.Second, 10*time.Millisecond)
	reads := d.index.(*natsjs.Index).Reads()
	r = b.mutate(t, r, running(1, "w", time.Now()))
	b.mutate(t, r, func(r *job.Record) { r.UpdatedAt = r.UpdatedAt.Add(time.Second) })
	require.Eventually(t, caughtUp, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, reads, d.index.(*natsjs.Index).Reads(), "the indexer read the store again for a job it listed")
	entries, err := b.conn.Res.Index.Page(ctx, "4", "reviewer-47", 0, 10)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}
