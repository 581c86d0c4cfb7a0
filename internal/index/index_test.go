package index

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

func openIndex(t *testing.T, path string, res *natsjs.Resources) *Index {
	t.Helper()
	x, err := Open(path, StoreSource(res.Jobs), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Close() })
	return x
}

func caughtUp(t *testing.T, x *Index) {
	t.Helper()
	require.NoError(t, x.CatchUp(context.Background(), 10*time.Second))
}

func ids(p Page) []string {
	out := make([]string, len(p.Entries))
	for i, e := range p.Entries {
		out[i] = e.ID
	}
	return out
}

// The index lists what the change log holds, newest first, by every
// filter, a page at a time; it follows changes and deletions, and counts
// per type what stats show.
func TestIndexListsAndCountsFromTheChangeLog(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	res := env.Connect(t, "index").Res
	ctx := context.Background()
	base := time.Now().UTC().Add(-time.Hour)
	var recs []*job.Record
	for i := range 6 {
		tenant, who := "4", "alice"
		if i%3 == 2 {
			tenant = "5"
		}
		if i%2 == 1 {
			who = "bob"
		}
		recs = append(recs, env.CommitAs(t, res, jobtest.Request{Tenant: tenant, Requester: who, Key: jobtest.ID("k", i)}, func(r *job.Record) {
			r.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		}))
	}
	x := openIndex(t, filepath.Join(t.TempDir(), "index.db"), res)
	caughtUp(t, x)

	all, err := x.Page(Query{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{recs[5].ID, recs[4].ID, recs[3].ID, recs[2].ID, recs[1].ID, recs[0].ID}, ids(all), "newest first")
	require.Empty(t, all.Next)

	t4, err := x.Page(Query{Tenant: "4", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{recs[4].ID, recs[3].ID}, ids(t4))
	require.NotEmpty(t, t4.Next)
	t4b, err := x.Page(Query{Tenant: "4", Limit: 2, After: t4.Next})
	require.NoError(t, err)
	require.Equal(t, []string{recs[1].ID, recs[0].ID}, ids(t4b), "the next page goes on below the cursor")

	bob, err := x.Page(Query{Tenant: "4", Requester: "bob", Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{recs[3].ID, recs[1].ID}, ids(bob))

	window, err := x.Page(Query{CreatedAfter: recs[1].CreatedAt, CreatedBefore: recs[4].CreatedAt, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{recs[3].ID, recs[2].ID}, ids(window), "both bounds exclusive")

	// Changes move a job between states and counters.
	now := time.Now().UTC()
	_, err = res.Jobs.Mutate(ctx, recs[0].Key(), func(r *job.Record) error { return r.Claim("w1", now) })
	require.NoError(t, err)
	_, err = res.Jobs.Mutate(ctx, recs[1].Key(), func(r *job.Record) error {
		if err := r.Claim("w1", now); err != nil {
			return err
		}
		return r.Fail(&job.Failure{Category: job.CategoryTimeout, Message: "late"}, now)
	})
	require.NoError(t, err)
	_, err = res.Jobs.Mutate(ctx, recs[3].Key(), func(r *job.Record) error {
		if err := r.Claim("w1", now); err != nil {
			return err
		}
		return r.ScheduleRetry(&job.Failure{Category: job.CategoryRenderError, Retryable: true}, now.Add(time.Minute), now)
	})
	require.NoError(t, err)
	caughtUp(t, x)

	failed, err := x.Page(Query{Tenant: "4", State: job.StateFailed, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{recs[1].ID}, ids(failed))
	timeouts, err := x.Page(Query{Category: job.CategoryTimeout, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{recs[1].ID}, ids(timeouts))
	queued, err := x.Page(Query{State: job.StateQueued, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{recs[5].ID, recs[4].ID, recs[2].ID}, ids(queued), "a job that left queued is no longer listed there")

	stats, err := x.Stats("4", now)
	require.NoError(t, err)
	require.Len(t, stats, 1)
	s := stats[0]
	require.Equal(t, "permit_report", s.Type)
	require.EqualValues(t, 1, s.Queued, "tenant 4: recs[4]")
	require.EqualValues(t, 1, s.Running)
	require.EqualValues(t, 1, s.Retrying)
	require.EqualValues(t, 1, s.LastHour.Failed)
	require.EqualValues(t, 1, s.LastDay.Failed)
	require.InDelta(t, now.Sub(recs[4].CreatedAt).Seconds(), s.OldestQueuedSeconds, 1)
	everyone, err := x.Stats("", now)
	require.NoError(t, err)
	require.EqualValues(t, 3, everyone[0].Queued)
	require.EqualValues(t, 0, everyone[0].LastHour.Succeeded)

	// A deleted record leaves the index.
	require.NoError(t, res.Jobs.KV().Delete(ctx, recs[5].Key()))
	caughtUp(t, x)
	_, ok := x.Lookup(recs[5].ID)
	require.False(t, ok)
	everyone, err = x.Stats("", now)
	require.NoError(t, err)
	require.EqualValues(t, 2, everyone[0].Queued)
}

// An index that is missing is built from the change log; one that is
// behind resumes where it stopped; an unreadable one is rebuilt.
func TestIndexRebuildsAndResumes(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	res := env.Connect(t, "index").Res
	path := filepath.Join(t.TempDir(), "index.db")
	a := env.Commit(t, res, jobtest.Request{Key: "a"})
	x, err := Open(path, StoreSource(res.Jobs), Options{})
	require.NoError(t, err)
	caughtUp(t, x)
	seq := x.Applied()
	require.NoError(t, x.Close())

	b := env.Commit(t, res, jobtest.Request{Key: "b"})
	y := openIndex(t, path, res)
	require.GreaterOrEqual(t, y.Applied(), seq, "resumes from the file")
	caughtUp(t, y)
	p, err := y.Page(Query{Limit: 10})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{a.ID, b.ID}, ids(p))
	require.NoError(t, y.Close())

	require.NoError(t, os.WriteFile(path, []byte("not a bbolt file, not at all, definitely not"), 0o600))
	z := openIndex(t, path, res)
	caughtUp(t, z)
	p, err = z.Page(Query{Limit: 10})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{a.ID, b.ID}, ids(p), "rebuilt from the change log")
}

// A page whose filters skip most entries ends after MaxScan of them with
// a cursor; a cursor not issued here is refused.
func TestIndexPageIsBounded(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	res := env.Connect(t, "index").Res
	x := openIndex(t, filepath.Join(t.TempDir(), "index.db"), res)
	_, err := x.Page(Query{Limit: 5, After: "bm90LWEtY3Vyc29y"})
	require.ErrorIs(t, err, job.ErrBadRequest)
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'A'
	}
	_, err = x.Page(Query{Limit: 5, After: string(long)})
	require.ErrorIs(t, err, job.ErrBadRequest)
}

// Two gateways given one data dir: the second finds the file held and says
// so (the gateway then builds its own index elsewhere) instead of waiting.
func TestIndexFileHeldElsewhereIsReported(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	res := env.Connect(t, "index").Res
	path := filepath.Join(t.TempDir(), "index.db")
	openIndex(t, path, res)
	_, err := Open(path, StoreSource(res.Jobs), Options{})
	require.ErrorIs(t, err, ErrLocked)
}
