package natsjs_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A key's places: at most limit live holders, a holder's own lease renewed
// (not a second place), a place given back free at once, and a lease not
// renewed for SlotTTL gone (expiry is judged on the time the caller
// passes: here a clock moved by hand).
func TestLeasesAreBoundedRenewedAndRunOut(t *testing.T) {
	t.Parallel()
	slots := jobtest.Start(t).Connect(t, "leases").Res.Slots
	ctx := context.Background()
	t0 := time.Now()
	require.NoError(t, slots.Lease(ctx, "fc.export.t.k", 2, "claim-a", t0))
	require.NoError(t, slots.Lease(ctx, "fc.export.t.k", 2, "claim-a", t0), "a renewal, not a second place")
	require.NoError(t, slots.Lease(ctx, "fc.export.t.k", 2, "claim-b", t0))
	require.ErrorIs(t, slots.Lease(ctx, "fc.export.t.k", 2, "claim-c", t0), natsjs.ErrNoSlot)
	require.NoError(t, slots.Lease(ctx, "fc.export.t.other", 2, "claim-c", t0), "another value's places are its own")

	require.NoError(t, slots.Unlease(ctx, "fc.export.t.k", "claim-b", t0))
	require.NoError(t, slots.Unlease(ctx, "fc.export.t.k", "claim-b", t0), "twice is no error")
	require.NoError(t, slots.Lease(ctx, "fc.export.t.k", 2, "claim-c", t0), "a place given back is free at once")

	// claim-a renews 20 s on; claim-c does not: 26 s on, only claim-a holds.
	require.NoError(t, slots.Lease(ctx, "fc.export.t.k", 2, "claim-a", t0.Add(20*time.Second)))
	late := t0.Add(natsjs.SlotTTL + time.Second)
	n, err := slots.Leased(ctx, "fc.export.t.k", late)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the lease not renewed ran out")
	require.NoError(t, slots.Lease(ctx, "fc.export.t.k", 2, "claim-d", late))
	require.ErrorIs(t, slots.Lease(ctx, "fc.export.t.k", 2, "claim-e", late), natsjs.ErrNoSlot)
}

// Hold renews only a live place: one that ran out, even with room left,
// is ErrLapsed (another holder may have had it meanwhile), and stays so;
// Yield says whether the place given back was still live.
func TestHoldRenewsOnlyALivePlace(t *testing.T) {
	t.Parallel()
	slots := jobtest.Start(t).Connect(t, "hold").Res.Slots
	ctx := context.Background()
	t0 := time.Now()
	const key = "fc.export.t.h"
	require.NoError(t, slots.Lease(ctx, key, 2, "claim-a", t0))
	until, err := slots.Hold(ctx, key, "claim-a", t0.Add(10*time.Second))
	require.NoError(t, err)
	require.Equal(t, t0.Add(10*time.Second+natsjs.SlotTTL).UnixMilli(), until.UnixMilli())
	_, err = slots.Hold(ctx, key, "claim-b", t0)
	require.ErrorIs(t, err, natsjs.ErrLapsed, "never taken")
	late := until.Add(time.Millisecond)
	_, err = slots.Hold(ctx, key, "claim-a", late)
	require.ErrorIs(t, err, natsjs.ErrLapsed, "run out, though the key has room")
	require.NoError(t, slots.Lease(ctx, key, 2, "claim-b", late))
	_, err = slots.Hold(ctx, key, "claim-a", late)
	require.ErrorIs(t, err, natsjs.ErrLapsed, "still")

	require.NoError(t, slots.Yield(ctx, key, "claim-b", late))
	require.ErrorIs(t, slots.Yield(ctx, key, "claim-b", late), natsjs.ErrLapsed, "given back already")
	require.NoError(t, slots.Unlease(ctx, key, "claim-b", late), "Unlease does not mind")
}

// Many holders racing for one key's place from several connections: at
// most limit hold one at any moment (every take and give-back recorded).
func TestLeasesHoldTheirLimitUnderContention(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	var held, most atomic.Int64
	var wg sync.WaitGroup
	for c := range 4 {
		slots := env.Connect(t, "leases").Res.Slots
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range 40 {
				holder := string(rune('a'+c)) + "-" + string(rune('0'+i%10)) + string(rune('0'+i/10))
				if err := slots.Lease(ctx, "fc.x.t.hot", 2, holder, time.Now()); err != nil {
					continue
				}
				now := held.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				held.Add(-1)
				require.NoError(t, slots.Unlease(ctx, "fc.x.t.hot", holder, time.Now()))
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, most.Load(), int64(2))
	require.Equal(t, int64(2), most.Load(), "the limit was reached")
}

// A rate bucket gives burst tokens at once, then one per 1/rate, across
// callers; empty, it says how long until the next.
func TestRateBucketTokens(t *testing.T) {
	t.Parallel()
	slots := jobtest.Start(t).Connect(t, "rate").Res.Slots
	ctx := context.Background()
	t0 := time.Now()
	for range 3 {
		wait, err := slots.TakeToken(ctx, "fr.x.all.x", 2, 3, t0)
		require.NoError(t, err)
		require.Zero(t, wait)
	}
	wait, err := slots.TakeToken(ctx, "fr.x.all.x", 2, 3, t0)
	require.NoError(t, err)
	require.InDelta(t, 500*time.Millisecond, wait, float64(5*time.Millisecond), "one token a half second")
	tokens, err := slots.Tokens(ctx, "fr.x.all.x", 2, 3, t0.Add(time.Second))
	require.NoError(t, err)
	require.InDelta(t, 2, tokens, 0.01)
	wait, err = slots.TakeToken(ctx, "fr.x.all.x", 2, 3, t0.Add(500*time.Millisecond))
	require.NoError(t, err)
	require.Zero(t, wait)
}

// Apply does several holders' operations on one key's places in one
// write, in order, each with its own outcome: a place given back first is
// free for a take after it, a take past the limit is refused, a hold of a
// holder with no place is ErrLapsed and changes nothing of the others'.
func TestApplyDoesSeveralOperationsInOneWrite(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	slots := env.Connect(t, "apply").Res.Slots
	ctx := context.Background()
	t0 := time.Now()
	const key = "fc.export.t.apply"
	require.NoError(t, slots.Lease(ctx, key, 2, "claim-a", t0))
	require.NoError(t, slots.Lease(ctx, key, 2, "claim-b", t0))
	writes := env.CountWrites(t, natsjs.BucketSlots)
	ops := []natsjs.LeaseOp{
		{Kind: natsjs.LeaseGive, Holder: "claim-a"},
		{Kind: natsjs.LeaseTake, Holder: "claim-c", Limit: 2},
		{Kind: natsjs.LeaseTake, Holder: "claim-d", Limit: 2},
		{Kind: natsjs.LeaseHold, Holder: "claim-b"},
		{Kind: natsjs.LeaseHold, Holder: "claim-a"},
		{Kind: natsjs.LeaseGive, Holder: "claim-x"},
	}
	require.NoError(t, slots.Apply(ctx, key, t0.Add(time.Second), ops))
	require.NoError(t, ops[0].Err)
	require.NoError(t, ops[1].Err, "the place given back first is taken")
	require.ErrorIs(t, ops[2].Err, natsjs.ErrNoSlot, "past the limit")
	require.NoError(t, ops[3].Err)
	require.ErrorIs(t, ops[4].Err, natsjs.ErrLapsed, "given back in the same write")
	require.ErrorIs(t, ops[5].Err, natsjs.ErrLapsed, "never held")
	require.Equal(t, int64(1), writes(), "one write")
	n, err := slots.Leased(ctx, key, t0.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	// claim-b was renewed a second later than it was taken.
	n, err = slots.Leased(ctx, key, t0.Add(natsjs.SlotTTL+500*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 2, n, "claim-b renewed, claim-c taken, at t0+1s")
}

// TakeTokens takes as many tokens as asked in one write while the bucket
// keeps as many, then fewer, one at a time near empty, and none when it is
// empty.
func TestTakeTokensTakesSeveralInOneWrite(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	slots := env.Connect(t, "tokens").Res.Slots
	ctx := context.Background()
	t0 := time.Now()
	writes := env.CountWrites(t, natsjs.BucketSlots)
	take := func(at time.Time) (int, time.Duration) {
		took, wait, err := slots.TakeTokens(ctx, "fr.x.all.y", 10, 13, 5, at)
		require.NoError(t, err)
		return took, wait
	}
	var got []int
	for range 7 {
		took, wait := take(t0)
		require.Zero(t, wait)
		got = append(got, took)
	}
	require.Equal(t, []int{5, 3, 1, 1, 1, 1, 1}, got, "13 tokens: a batch while the bucket keeps as many, then one at a time")
	took, wait := take(t0)
	require.Zero(t, took)
	require.InDelta(t, 100*time.Millisecond, wait, float64(5*time.Millisecond), "one token a tenth of a second")
	took, _ = take(t0.Add(time.Second))
	require.Equal(t, 5, took, "a second's refill")
	require.Equal(t, int64(8), writes(), "a write a take")
}
