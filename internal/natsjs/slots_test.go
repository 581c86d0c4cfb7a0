package natsjs_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// At most limit slots of a type are held at once, whoever holds them; a
// slot given back is free at once, and one whose holder stopped renewing
// (a dispatcher killed mid-request) comes back within SlotTTL, while a
// renewed one stays held.
func TestSlotsAreBoundedAndComeBackFromADeadHolder(t *testing.T) {
	t.Parallel()
	slots := jobtest.Start(t).Connect(t, "slots").Res.Slots
	ctx, cancel := context.WithTimeout(context.Background(), 2*natsjs.SlotTTL)
	defer cancel()

	a, err := slots.Acquire(ctx, "thumbnail", 2, "dispatcher-a")
	require.NoError(t, err)
	b, err := slots.Acquire(ctx, "thumbnail", 2, "dispatcher-b")
	require.NoError(t, err)
	require.NotEqual(t, a.Key, b.Key)
	_, err = slots.Acquire(ctx, "thumbnail", 2, "dispatcher-c")
	require.ErrorIs(t, err, natsjs.ErrNoSlot)
	other, err := slots.Acquire(ctx, "export", 2, "dispatcher-c")
	require.NoError(t, err, "another type's slots are its own")
	require.NoError(t, slots.Release(ctx, other))

	require.NoError(t, slots.Release(ctx, b))
	b, err = slots.Acquire(ctx, "thumbnail", 2, "dispatcher-b")
	require.NoError(t, err, "a slot given back is free at once")

	// a's holder dies; b's renews.
	died := time.Now()
	var took time.Duration
	for {
		b, err = slots.Renew(ctx, b, "dispatcher-b")
		require.NoError(t, err)
		if _, err := slots.Acquire(ctx, "thumbnail", 2, "dispatcher-c"); err == nil {
			took = time.Since(died)
			break
		}
		require.Less(t, time.Since(died), 30*time.Second, "the dead holder's slot came back within 30 s")
		time.Sleep(time.Second)
	}
	t.Logf("the dead holder's slot came back after %s", took)
	require.GreaterOrEqual(t, took, natsjs.SlotTTL-2*time.Second, "not before its lease ran out")
	_, err = slots.Renew(ctx, a, "dispatcher-a")
	require.ErrorIs(t, err, natsjs.ErrStale, "the dead holder's lease is gone")
	_, err = slots.Acquire(ctx, "thumbnail", 2, "dispatcher-d")
	require.ErrorIs(t, err, natsjs.ErrNoSlot, "b's renewed slot and c's new one")
}
