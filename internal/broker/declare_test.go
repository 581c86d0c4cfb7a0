package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/internal/schemapool"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// declareSetup starts an embedded JetStream and one broker of cfg (over
// testConfig) answering on it.
func declareSetup(t *testing.T, adjust func(*Config)) (*Broker, *testBundle) {
	t.Helper()
	b, tb, _ := declareSetupLogged(t, adjust)
	return b, tb
}

// declareSetupLogged is declareSetup with the broker's warnings kept.
func declareSetupLogged(t *testing.T, adjust func(*Config)) (*Broker, *testBundle, *jobtest.SyncBuffer) {
	t.Helper()
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	cfg := testConfig()
	adjust(&cfg)
	logs := &jobtest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := New(cfg, storesOf(env.ConnectLayout(t, "broker", natsjs.DefaultLayout())), log)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.Start(ctx))
	stopAtCleanup(t, b)
	return b, tb, logs
}

// declaration is a closed type whose one property is named prop.
func declaration(name, prop string) wire.DeclareRequest {
	return wire.DeclareRequest{Worker: "w", Type: wire.Declaration{Name: name,
		Schema:         json.RawMessage(fmt.Sprintf(`{"type":"object","additionalProperties":false,"properties":{%q:{"type":"integer"}}}`, prop)),
		TimeoutSeconds: 60, Attempts: 2, MaxResultBytes: 1 << 20, ContentType: "text/csv"}}
}

// A declaration identical to the stored one (whatever its spelling)
// compiles nothing and writes nothing, and takes none of the
// credential's changes.
func TestAnIdenticalDeclarationCompilesAndWritesNothing(t *testing.T) {
	t.Parallel()
	pool := schemapool.New(1)
	_, tb := declareSetup(t, func(c *Config) { c.Schemas, c.DeclareBurst = pool, 1 })
	require.Nil(t, tb.ask(t, credA, "export", wire.OpDeclare, declaration("export", "n")).Error)
	require.EqualValues(t, 1, pool.Compiles())
	ctx := context.Background()
	first, err := tb.conn.Res.Types.Get(ctx, "export")
	require.NoError(t, err)

	respelled := declaration("export", "n")
	respelled.Type.Schema = json.RawMessage(`{ "properties": {"n": {"type": "integer"}}, "type": "object", "additionalProperties": false }`)
	for range 20 {
		require.Nil(t, tb.ask(t, credA, "export", wire.OpDeclare, respelled).Error)
	}
	require.EqualValues(t, 1, pool.Compiles(), "nothing compiled again")
	again, err := tb.conn.Res.Types.Get(ctx, "export")
	require.NoError(t, err)
	require.Equal(t, first.DeclaredAt, again.DeclaredAt, "nothing written")
	require.JSONEq(t, string(first.Schema), string(again.Schema))

	require.Nil(t, tb.ask(t, credA, "export", wire.OpDeclare, declaration("export", "m")).Error,
		"the credential's one change is still there")
	require.EqualValues(t, 2, pool.Compiles())
	r := tb.ask(t, credB, "export", wire.OpDeclare, declaration("export", "m"))
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeForbidden, r.Error.Code, "identical, but another credential's type")
}

// A credential changes its declarations DeclareBurst times, then once
// every DeclareEvery: beyond, throttled with the wait, nothing compiled or
// stored; another credential is not held back by it.
func TestDeclarationChangesAreThrottledPerCredential(t *testing.T) {
	t.Parallel()
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	pool := schemapool.New(1)
	_, tb, logs := declareSetupLogged(t, func(c *Config) {
		c.Schemas, c.Now = pool, func() time.Time { return *now.Load() }
	})
	require.Nil(t, tb.ask(t, credA, "export", wire.OpDeclare, declaration("export", "p0")).Error, "a first declaration is free")
	for i := 1; i <= 5; i++ {
		require.Nil(t, tb.ask(t, credA, "export", wire.OpDeclare, declaration("export", fmt.Sprint("p", i))).Error, "change %d", i)
	}
	r := tb.ask(t, credA, "export", wire.OpDeclare, declaration("export", "p6"))
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeThrottled, r.Error.Code)
	require.Contains(t, r.Error.Message, "at most 5 at once, then one every 10s")
	require.EqualValues(t, 10_000, r.Error.RetryAfterMS)
	require.EqualValues(t, 6, pool.Compiles(), "the refused change was not compiled")
	stored, err := tb.conn.Res.Types.Get(context.Background(), "export")
	require.NoError(t, err)
	require.Contains(t, string(stored.Schema), `"p5"`)

	require.Nil(t, tb.ask(t, credA, "export", wire.OpDeclare, declaration("export", "p5")).Error,
		"the stored declaration again is not a change")
	require.Nil(t, tb.ask(t, credB, "other", wire.OpDeclare, declaration("other", "q")).Error)
	require.Nil(t, tb.ask(t, credB, "other", wire.OpDeclare, declaration("other", "q1")).Error, "another credential's bucket")

	// Past the bucket a request is refused before it is even decoded:
	// a flood costs a hash a request.
	data, err := tb.conn.NC.Request(wire.Subject(credA, "export", wire.OpDeclare), []byte(`{"not json`), 5*time.Second)
	require.NoError(t, err)
	var garbage wire.Reply
	require.NoError(t, json.Unmarshal(data.Data, &garbage))
	require.NotNil(t, garbage.Error)
	require.Equal(t, wire.CodeThrottled, garbage.Error.Code, "not decoded: %s", garbage.Error.Message)
	r = tb.ask(t, credA, "fresh", wire.OpDeclare, declaration("fresh", "f"))
	require.NotNil(t, r.Error, "with no change left, a first declaration waits its turn too")
	require.Equal(t, wire.CodeThrottled, r.Error.Code)

	later := start.Add(4 * time.Second)
	now.Store(&later)
	r = tb.ask(t, credA, "export", wire.OpDeclare, declaration("export", "p6"))
	require.NotNil(t, r.Error)
	require.EqualValues(t, 6_000, r.Error.RetryAfterMS, "the wait shrinks as time passes")
	later = start.Add(10 * time.Second)
	now.Store(&later)
	require.Equal(t, 1, strings.Count(logs.String(), "changes its declarations too often"),
		"four refusals, one warning a DeclareEvery: %s", logs.String())
	require.NotContains(t, logs.String(), `{"not json`)
	require.Nil(t, tb.ask(t, credA, "fresh", wire.OpDeclare, declaration("fresh", "f")).Error, "after the wait")
	require.Nil(t, tb.ask(t, credA, "export", wire.OpDeclare, declaration("export", "p6")).Error,
		"the first declaration gave its change back")
	require.NotNil(t, tb.ask(t, credA, "export", wire.OpDeclare, declaration("export", "p7")).Error, "and that was the one")
}

// Forty declarations at once, of forty credentials, run one compile at a
// time; those that cannot get the compiler within CompileWait are
// throttled, with a wait.
func TestConcurrentDeclarationsCompileOneAtATime(t *testing.T) {
	t.Parallel()
	var running, most atomic.Int32
	release := make(chan struct{})
	pool := schemapool.NewWith(1, func(raw []byte) (*schema.Schema, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		return schema.Compile(raw)
	})
	b, _ := declareSetup(t, func(c *Config) { c.Schemas, c.CompileWait = pool, 300*time.Millisecond })
	replies := make(chan *wire.Reply, 40)
	for i := range 40 {
		typ := fmt.Sprint("t", i)
		r := &request{cred: fmt.Sprintf("c%015d", i), typ: typ, msg: mustMsg(t, declaration(typ, "n"))}
		go func() { replies <- b.declare(context.Background(), r) }()
	}
	busy := 0
	for range 39 { // all but the one compiling give up after CompileWait
		r := <-replies
		require.NotNil(t, r.Error)
		require.Equal(t, wire.CodeThrottled, r.Error.Code)
		require.Contains(t, r.Error.Message, "compiler is busy")
		require.Positive(t, r.Error.RetryAfterMS)
		busy++
	}
	close(release)
	require.Nil(t, (<-replies).Error)
	require.EqualValues(t, 1, most.Load(), "one compile at a time")
	require.EqualValues(t, 1, pool.Compiles())
}
