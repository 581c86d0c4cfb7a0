package natsjs_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// setupStore provisions a fresh embedded deployment and returns its record
// store.
func setupStore(t *testing.T) *natsjs.Store {
	t.Helper()
	res, err := provision(setupProvision(t), natsjs.DefaultLayout())
	require.NoError(t, err)
	return res.Jobs
}

func newRecord(tenant, requester, id string) *job.Record {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return &job.Record{ID: id, Tenant: tenant, Requester: requester, Type: "permit_report", Params: []byte(`{"case_id":1}`),
		Fingerprint: "fp-" + id, State: job.StateQueued, CreatedAt: now, UpdatedAt: now}
}

func storeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Of any number of concurrent creates of one key exactly one succeeds; the
// others get ErrExists and the stored record is the winner's.
func TestStoreCreateIsCreateOnly(t *testing.T) {
	t.Parallel()
	s, ctx := setupStore(t), storeCtx(t)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := newRecord("4", "reviewer-47", "job_race")
			r.Fingerprint = "fp-" + string(rune('a'+i))
			errs[i] = s.Create(ctx, r)
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, won, "a second create succeeded")
			won = i
			continue
		}
		require.ErrorIs(t, err, natsjs.ErrExists, "create %d", i)
	}
	require.NotEqual(t, -1, won, "one create succeeds")
	got, err := s.Get(ctx, job.StoreKey("4", "reviewer-47", "job_race"))
	require.NoError(t, err)
	require.Equal(t, "fp-"+string(rune('a'+won)), got.Fingerprint, "the stored record is the winner's")
	require.NotZero(t, got.Revision)
}

// An update against an older revision loses: ErrStale, nothing written.
func TestStoreStaleUpdate(t *testing.T) {
	t.Parallel()
	s, ctx := setupStore(t), storeCtx(t)
	r := newRecord("4", "reviewer-47", "job_stale")
	require.NoError(t, s.Create(ctx, r))
	first := r.Revision

	a, err := s.Get(ctx, r.Key())
	require.NoError(t, err)
	b := a.Clone()
	require.NoError(t, a.Transition(job.StateRunning, time.Now()))
	require.NoError(t, s.Update(ctx, a))
	require.Greater(t, a.Revision, first, "the update moved the revision")

	require.NoError(t, b.Transition(job.StateCanceled, time.Now()))
	err = s.Update(ctx, b)
	require.ErrorIs(t, err, natsjs.ErrStale)
	require.NotErrorIs(t, err, natsjs.ErrExists, "a lost compare-and-set is not a taken create")
	got, err := s.Get(ctx, r.Key())
	require.NoError(t, err)
	require.Equal(t, job.StateRunning, got.State, "the stale write changed nothing")
	require.Equal(t, a.Revision, got.Revision)

	_, err = s.Get(ctx, job.StoreKey("4", "reviewer-47", "job_missing"))
	require.ErrorIs(t, err, job.ErrNotFound)
}

// Mutate under contention: every one of many concurrent read-modify-writes
// lands exactly once.
func TestStoreMutateUnderContention(t *testing.T) {
	t.Parallel()
	s, ctx := setupStore(t), storeCtx(t)
	r := newRecord("4", "reviewer-47", "job_busy")
	require.NoError(t, s.Create(ctx, r))
	const writers, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for range writers {
		wg.Go(func() {
			for range each {
				_, err := s.Mutate(ctx, r.Key(), func(n *job.Record) error {
					n.Attempt++
					return nil
				})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got, err := s.Get(ctx, r.Key())
	require.NoError(t, err)
	require.Equal(t, writers*each, got.Attempt, "no increment was lost or applied twice")

	// A refusing fn writes nothing and returns its error with the record.
	cur, err := s.Mutate(ctx, r.Key(), func(n *job.Record) error { return job.ErrTerminal })
	require.ErrorIs(t, err, job.ErrTerminal)
	require.Equal(t, got.Revision, cur.Revision)
}

// List and FindInTenant never return another tenant's (or, for List with a
// requester, another requester's) jobs, even where ids coincide.
func TestStoreReadsStayInScope(t *testing.T) {
	t.Parallel()
	s, ctx := setupStore(t), storeCtx(t)
	for _, r := range []*job.Record{
		newRecord("4", "reviewer-47", "job_a"),
		newRecord("4", "reviewer-47", "job_b"),
		newRecord("4", "reviewer-9", "job_c"),
		newRecord("44", "reviewer-47", "job_a"), // same requester and id, other tenant
		newRecord("5", "reviewer-47", "job_d"),
	} {
		require.NoError(t, s.Create(ctx, r))
	}
	keys := func(rs []*job.Record) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.Key())
		}
		sort.Strings(out)
		return out
	}
	own, err := s.List(ctx, "4", "reviewer-47")
	require.NoError(t, err)
	require.Equal(t, []string{"4.reviewer-47.job_a", "4.reviewer-47.job_b"}, keys(own))
	tenant, err := s.List(ctx, "4", "")
	require.NoError(t, err)
	require.Equal(t, []string{"4.reviewer-47.job_a", "4.reviewer-47.job_b", "4.reviewer-9.job_c"}, keys(tenant))
	none, err := s.List(ctx, "6", "")
	require.NoError(t, err)
	require.Empty(t, none)

	found, err := s.FindInTenant(ctx, "4", "job_c")
	require.NoError(t, err)
	require.Equal(t, "reviewer-9", found.Requester)
	found, err = s.FindInTenant(ctx, "44", "job_a")
	require.NoError(t, err)
	require.Equal(t, "44", found.Tenant)
	_, err = s.FindInTenant(ctx, "4", "job_d")
	require.ErrorIs(t, err, job.ErrNotFound, "tenant 5's job is not found from tenant 4")
}

// A record is stored as jetstream.KeyValue stores it: under the bucket's
// subject, with the layout's time to live on its creation; a key left with
// only a deletion marker can be created again; a key nats.go would refuse
// writes nothing.
func TestStoreWritesAsTheBucketDoes(t *testing.T) {
	t.Parallel()
	ctx := storeCtx(t)
	res, err := provision(setupProvision(t), natsjs.DefaultLayout())
	require.NoError(t, err)
	s := res.Jobs
	r := newRecord("4", "reviewer-47", "job_kv")
	require.NoError(t, s.Create(ctx, r))
	e, err := s.KV().Get(ctx, r.Key())
	require.NoError(t, err)
	require.Equal(t, r.Revision, e.Revision())
	stream, err := res.JS.Stream(ctx, "KV_"+natsjs.BucketJobs)
	require.NoError(t, err)
	raw, err := stream.GetLastMsgForSubject(ctx, "$KV."+natsjs.BucketJobs+"."+r.Key())
	require.NoError(t, err)
	require.Equal(t, natsjs.DefaultLayout().JobTTL.String(), raw.Header.Get(jetstream.MsgTTLHeader))

	require.NoError(t, s.KV().Delete(ctx, r.Key()))
	again := newRecord("4", "reviewer-47", "job_kv")
	require.NoError(t, s.Create(ctx, again), "a deleted record's key can be created again")
	require.Greater(t, again.Revision, r.Revision)
	require.ErrorIs(t, s.Create(ctx, newRecord("4", "reviewer-47", "job_kv")), natsjs.ErrExists)

	before, err := stream.Info(ctx)
	require.NoError(t, err)
	bad := newRecord("4", "reviewer 47", "job_kv")
	require.ErrorIs(t, s.Create(ctx, bad), jetstream.ErrInvalidKey)
	bad.Revision = again.Revision
	require.ErrorIs(t, s.Update(ctx, bad), jetstream.ErrInvalidKey)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, before.State.LastSeq, info.State.LastSeq, "a bad key writes nothing")
}
