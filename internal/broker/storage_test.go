package broker

import (
	"bytes"
	"context"
	"testing"

	"github.com/jobgate/jobgate/internal/jobtest"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/stretchr/testify/require"
)

// A result that does not fit in the results' byte budget is refused as too
// large, which fails the job (budget_exceeded) instead of handing it back
// to wait for room that may never come.
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
}
