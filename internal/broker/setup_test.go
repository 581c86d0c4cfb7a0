package broker

import (
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
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

type testBundle struct {
	env    *jobtest.Env
	conn   *jobtest.Conn
	layout *natsjs.Layout // nil: the default
	log    *slog.Logger   // nil: discarded
}

func testConfig() Config {
	return Config{BeatInterval: 200 * time.Millisecond, StaleAfter: time.Second,
		RetryBase: time.Second}
}

// setup starts an embedded JetStream and one started broker on a
// connection of its own.
func setup(t *testing.T) (*Broker, *testBundle) {
	t.Helper()
	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test")}
	return b.broker(t, true), b
}

// setupClocked is setup with the broker's clock ahead of the real one by
// the offset it returns, which the test moves; before, if set, adjusts the
// broker before it starts.
func setupClocked(t *testing.T, before func(*Broker, *atomic.Int64)) (*Broker, *testBundle, *atomic.Int64) {
	t.Helper()
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	offset := new(atomic.Int64)
	cfg := testConfig()
	cfg.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	b, err := New(cfg, storesOf(env.Connect(t, "broker")), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	if before != nil {
		before(b, offset)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.Start(ctx))
	stopAtCleanup(t, b)
	return b, tb, offset
}

func (tb *testBundle) broker(t *testing.T, start bool) *Broker {
	t.Helper()
	layout := natsjs.DefaultLayout()
	if tb.layout != nil {
		layout = *tb.layout
	}
	conn := tb.env.ConnectLayout(t, "broker", layout)
	log := tb.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b, err := New(testConfig(), storesOf(conn), log)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if start {
		require.NoError(t, b.Start(ctx))
	} else {
		b.secret, err = conn.Res.Secrets.Get(ctx, SecretClaims)
		require.NoError(t, err)
		b.ctx, b.cancel = context.WithCancel(context.Background())
		b.started = time.Now()
	}
	stopAtCleanup(t, b)
	return b
}

// stopAtCleanup stops b, within a deadline, when the test ends.
func stopAtCleanup(t *testing.T, b *Broker) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, b.Stop(ctx))
	})
}

// storesOf is system's BrokerStores on conn, which this package's
// tests cannot import (it imports the broker).
func storesOf(conn *jobtest.Conn) Stores {
	res := conn.Res
	return Stores{Jobs: res.Jobs, Work: res.Work, Events: res.Events, Secrets: res.Secrets, Types: res.Types, Results: res, Slots: res.Slots, Conn: conn.NC}
}

// ask sends one request as credential cred and returns the reply.
func (tb *testBundle) ask(t *testing.T, cred, typ, op string, req any) *wire.Reply {
	t.Helper()
	data, err := json.Marshal(req)
	require.NoError(t, err)
	msg, err := tb.conn.NC.Request(wire.Subject(cred, typ, op), data, 15*time.Second)
	require.NoError(t, err)
	var reply wire.Reply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	return &reply
}

// declare declares a small closed type as cred.
func (tb *testBundle) declare(t *testing.T, cred, name, contentType string) *wire.Reply {
	t.Helper()
	return tb.ask(t, cred, name, wire.OpDeclare, wire.DeclareRequest{Worker: "w", Type: wire.Declaration{
		Name: name, Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		TimeoutSeconds: 60, Attempts: 2, MaxResultBytes: 1 << 20, ContentType: contentType,
	}})
}

// admit admits a job of typ with no params, as the gateway does.
func (tb *testBundle) admit(t *testing.T, typ, key string) *job.Record {
	t.Helper()
	return tb.admitWith(t, typ, key, func(rec *job.Record) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, tb.conn.Res.Work.Publish(ctx, rec, 0))
	})
}

// admitWith commits a job of typ with no params and has publish publish
// its work.
func (tb *testBundle) admitWith(t *testing.T, typ, key string, publish func(*job.Record)) *job.Record {
	t.Helper()
	now := time.Now().UTC()
	rec := &job.Record{ID: job.DeriveID(tb.env.Secret, "4", "reviewer-47", key), Tenant: "4", Requester: "reviewer-47",
		KeyHash: job.HashKey(key), Fingerprint: "f-" + key, Type: typ, Params: json.RawMessage(`{}`),
		State: job.StateQueued, CreatedAt: now, UpdatedAt: now, MaxAttempts: 2, TimeoutSeconds: 60}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tb.conn.Res.Jobs.Create(ctx, rec))
	publish(rec)
	return rec
}

// next asks for the next job until one comes, within 10s.
func (tb *testBundle) next(t *testing.T, cred, typ, worker string) *wire.Assignment {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r := tb.ask(t, cred, typ, wire.OpNext, wire.NextRequest{Worker: worker, WaitMS: 2000})
		require.Nil(t, r.Error)
		if r.Job != nil {
			return r.Job
		}
	}
	t.Fatal("no job within 10s")
	return nil
}

func (tb *testBundle) record(t *testing.T, key string) *job.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := tb.conn.Res.Jobs.Get(ctx, key)
	require.NoError(t, err)
	return rec
}

// chunk sends one upload chunk.
func (tb *testBundle) chunk(t *testing.T, cred, typ string, u *wire.UploadTarget, seq int, data []byte, last bool) *wire.Reply {
	t.Helper()
	m := nats.NewMsg(wire.UploadSubject(cred, typ, u.Host, u.ID))
	m.Data = data
	m.Header.Set(wire.HeaderSeq, itoa(seq))
	if last {
		m.Header.Set(wire.HeaderLast, "1")
	}
	resp, err := tb.conn.NC.RequestMsg(m, 15*time.Second)
	require.NoError(t, err)
	var reply wire.Reply
	require.NoError(t, json.Unmarshal(resp.Data, &reply))
	return &reply
}

// declareWith declares a small closed type as cred through b's handler.
func (tb *testBundle) declareWith(t *testing.T, b *Broker, cred, name string) *wire.Reply {
	t.Helper()
	req := &request{cred: cred, typ: name, msg: mustMsg(t, wire.DeclareRequest{Worker: "w", Type: wire.Declaration{
		Name: name, Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		TimeoutSeconds: 60, Attempts: 2, MaxResultBytes: 1 << 20, ContentType: "text/plain",
	}})}
	return b.declare(context.Background(), req)
}

// upload stores data as the held job's result through b's upload path,
// with a subscription of b's own.
func (tb *testBundle) upload(t *testing.T, b *Broker, cred, typ string, h wire.Held, data []byte) *wire.StoredResult {
	t.Helper()
	open := b.open(context.Background(), &request{cred: cred, typ: typ, msg: mustMsg(t, h)})
	require.Nil(t, open.Error)
	last := tb.chunk(t, cred, typ, open.Upload, 0, data, true)
	require.Nil(t, last.Error)
	return last.Stored
}

func mustMsg(t *testing.T, v any) *nats.Msg {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return &nats.Msg{Data: data}
}
