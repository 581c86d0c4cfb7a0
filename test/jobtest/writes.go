package jobtest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// CountWrites counts, from now on, the writes stored in a key-value bucket
// (puts, compare-and-sets, deletes) by any connection of e: the returned
// function reads how many so far, from the bucket's stream (its last
// sequence), so a write is counted once its writer has its answer. A
// compare-and-set refused is not counted.
func (e *Env) CountWrites(t testing.TB, bucket string) func() int64 {
	t.Helper()
	js, err := jetstream.New(e.Connect(t, "writes-"+bucket).NC)
	require.NoError(t, err)
	last := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "KV_"+bucket)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		return int64(info.State.LastSeq)
	}
	from := last()
	return func() int64 { return last() - from }
}
