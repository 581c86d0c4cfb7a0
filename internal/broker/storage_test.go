package broker

import (
	"bytes"
	"context"
	"testing"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A result that does not fit in the results' byte budget is refused as too
// large, and the broker fails the job (budget_exceeded) instead of handing
// it back to wait for room that may never come, whatever its worker
// reports next.
func TestAResultPastTheResultsBudgetIsTooLarge(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	layout := natsjs.DefaultLayout()
	layout.ResultsMaxBytes = 64 << 10
	tb := &testBundle{env: env, conn: env.ConnectLayout(t, "small", layout), layout: &layout}
	b := tb.broker(t, true)
	require.Nil(t, tb.declareWith(t, b, credA, "big").Error)
	tb.admit(t, "big", "b-1")
	a := tb.next(t, credA, "big", "worker-a")
	open := b.open(context.Background(), &request{cred: credA, typ: "big", msg: mustMsg(t, wire.Held{Key: a.Key, Token: a.Token})})
	require.Nil(t, open.Error)
	r := tb.chunk(t, credA, "big", open.Upload, 0, bytes.Repeat([]byte("y"), 100<<10), true)
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeTooLarge, r.Error.Code, r.Error.Message)
	require.True(t, r.Failed, "the refusal says the job is failed: the worker reports nothing more")
	rec := tb.record(t, a.Key)
	require.Equal(t, job.StateFailed, rec.State)
	require.Equal(t, job.CategoryBudgetExceeded, rec.Error.Category)
	require.Contains(t, rec.Error.Message, "result storage is full")
	require.Empty(t, jobtest.Objects(t, tb.conn.Res))
}
