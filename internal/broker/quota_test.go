package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// brokerWith is tb.broker, started, with cfg adjusted.
func (tb *testBundle) brokerWith(t *testing.T, adjust func(*Config)) *Broker {
	t.Helper()
	cfg := testConfig()
	adjust(&cfg)
	conn := tb.env.Connect(t, "broker")
	b, err := New(cfg, storesOf(conn), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.Start(ctx))
	stopAtCleanup(t, b)
	return b
}

// claimFor admits a job of typ for tenant and claims it as credA.
func (tb *testBundle) claimFor(t *testing.T, typ, tenant, key string) (*job.Record, wire.Held) {
	t.Helper()
	now := time.Now().UTC()
	rec := &job.Record{ID: job.DeriveID(tb.env.Secret, tenant, "reviewer-47", key), Tenant: tenant, Requester: "reviewer-47",
		KeyHash: job.HashKey(key), Fingerprint: "f-" + key, Type: typ, Params: json.RawMessage(`{}`),
		State: job.StateQueued, CreatedAt: now, UpdatedAt: now, MaxAttempts: 2, TimeoutSeconds: 60}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tb.conn.Res.Jobs.Create(ctx, rec))
	require.NoError(t, tb.conn.Res.Work.Publish(ctx, rec, 0))
	a := tb.next(t, credA, typ, "worker-a")
	require.Equal(t, rec.Key(), a.Key)
	return rec, wire.Held{Key: a.Key, Token: a.Token}
}

// send streams data as an upload in chunks of at most chunk bytes, through
// the brokers' subjects, and returns the first refusal or the last answer.
func (tb *testBundle) send(t *testing.T, typ string, h wire.Held, data []byte, chunk int) *wire.Reply {
	t.Helper()
	open := tb.ask(t, credA, typ, wire.OpOpen, h)
	require.Nil(t, open.Error)
	for seq := 0; ; seq++ {
		part := data[:min(chunk, len(data))]
		data = data[len(part):]
		r := tb.chunk(t, credA, typ, open.Upload, seq, part, len(data) == 0)
		if r.Error != nil || len(data) == 0 {
			return r
		}
	}
}

// resultsStored is the results' stream's state: its bytes and messages.
func (tb *testBundle) resultsStored(t *testing.T) (uint64, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := tb.conn.Res.JS.Stream(ctx, "OBJ_"+natsjs.BucketResults)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	return info.State.Bytes, info.State.Msgs
}

// Filling a small result quota of one tenant: its next result is refused
// as its bytes arrive, past the quota, and fails its job budget_exceeded at
// once (the worker's own report is answered lost), leaving nothing of the
// result in the store; another tenant still stores its results; a second
// broker, which did not see the uploads, counts them from the objects; and
// once the tenant's objects are gone its results are stored again.
func TestAResultPastItsTenantsQuotaFailsItsJobAndLeavesNothing(t *testing.T) {
	t.Parallel()
	const quota = 600 << 10
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	var refused atomic.Int32
	b := tb.brokerWith(t, func(c *Config) {
		c.TenantResultsMaxBytes = quota
		c.OnResultQuotaFull = func() { refused.Add(1) }
	})
	require.Nil(t, tb.declareWith(t, b, credA, "doc").Error)

	first, h := tb.claimFor(t, "doc", "A", "a-1")
	stored := tb.send(t, "doc", h, bytes.Repeat([]byte("a"), 300<<10), wire.ChunkSize)
	require.Nil(t, stored.Error)
	require.Nil(t, tb.ask(t, credA, "doc", wire.OpDone, wire.DoneRequest{Held: h, Result: stored.Stored}).Error)

	over, h := tb.claimFor(t, "doc", "A", "a-2")
	bytesBefore, msgsBefore := tb.resultsStored(t)
	// 300 KiB stored and 256 KiB of this one fit in 600 KiB; its next
	// 100 KiB do not.
	r := tb.send(t, "doc", h, bytes.Repeat([]byte("b"), 356<<10), wire.ChunkSize)
	require.NotNil(t, r.Error, "the chunk past the quota is refused")
	require.Equal(t, wire.CodeTooLarge, r.Error.Code, r.Error.Message)
	require.Contains(t, r.Error.Message, "result quota")
	require.True(t, r.Failed, "the refusal says the job is failed: the worker reports nothing more")
	require.EqualValues(t, 1, refused.Load())

	rec := tb.record(t, over.Key())
	require.Equal(t, job.StateFailed, rec.State, "the job fails at the refusal, whatever its worker does next")
	require.NotNil(t, rec.Error)
	require.Equal(t, job.CategoryBudgetExceeded, rec.Error.Category)
	require.False(t, rec.Error.Retryable)
	require.Contains(t, rec.Error.Message, "result quota of 614400 bytes")
	lost := tb.ask(t, credA, "doc", wire.OpFail, wire.FailRequest{Held: h, Kind: wire.KindInternal, Retryable: true, Message: "upload refused"})
	require.NotNil(t, lost.Error)
	require.Equal(t, wire.CodeLost, lost.Error.Code, "the worker's own verdict changes nothing")

	require.Equal(t, []string{objectName(tb.record(t, first.Key()))}, jobtest.Objects(t, tb.conn.Res), "no object of the refused result")
	bytesAfter, msgsAfter := tb.resultsStored(t)
	require.Equal(t, msgsBefore, msgsAfter, "its chunks taken before the refusal were purged")
	require.Equal(t, bytesBefore, bytesAfter)

	// Another tenant's quota is its own.
	_, h = tb.claimFor(t, "doc", "B", "b-1")
	other := tb.send(t, "doc", h, bytes.Repeat([]byte("c"), 500<<10), wire.ChunkSize)
	require.Nil(t, other.Error)
	require.Nil(t, tb.ask(t, credA, "doc", wire.OpDone, wire.DoneRequest{Held: h, Result: other.Stored}).Error)

	// A broker that saw none of it counts it from the objects' tenants.
	b2 := tb.brokerWith(t, func(c *Config) { c.TenantResultsMaxBytes = quota })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, b2.quota.Refresh(ctx))
	require.EqualValues(t, 300<<10, b2.quota.Used("A"))
	require.EqualValues(t, 500<<10, b2.quota.Used("B"))
	fits, _ := b2.quota.Reserve("A", 301<<10)
	require.False(t, fits)

	// Once A's result is gone (deleted here, expired in production), the
	// next reading frees its quota.
	require.NoError(t, tb.conn.Res.DeleteResult(ctx, objectName(tb.record(t, first.Key()))))
	require.NoError(t, b.quota.Refresh(ctx))
	require.NoError(t, b2.quota.Refresh(ctx))
	_, h = tb.claimFor(t, "doc", "A", "a-3")
	again := tb.send(t, "doc", h, bytes.Repeat([]byte("d"), 500<<10), wire.ChunkSize)
	require.Nil(t, again.Error, "A stores results again")
	require.EqualValues(t, 1, refused.Load())
}
