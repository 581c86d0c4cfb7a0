package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/internal/schemapool"
	"github.com/stretchr/testify/require"
)

// shifting is a type whose one required integer is named prop.
func shifting(prop string, attempts int) *job.TypeDecl {
	return &job.TypeDecl{Name: "shifting", Owner: "cred-a", TimeoutSeconds: 60, Attempts: attempts,
		MaxResultBytes: 1 << 20, ContentType: "text/plain", DeclaredAt: time.Now().UTC(),
		Schema: json.RawMessage(fmt.Sprintf(`{"type":"object","additionalProperties":false,"required":[%q],"properties":{%q:{"type":"integer"}}}`, prop, prop))}
}

// compileSetup is setup with the gateway's schemas compiled by pool.
func compileSetup(t *testing.T, pool *schemapool.Pool) *testBundle {
	t.Helper()
	g, b := setup(t)
	g.types.mu.Lock()
	g.types.pool = pool
	g.types.mu.Unlock()
	return b
}

func (b *testBundle) storeDecl(t *testing.T, d *job.TypeDecl) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.res.Types.DeclareOwned(ctx, d))
}

var submissions atomic.Int64

// status submits a shifting job whose params name prop.
func (b *testBundle) shiftingStatus(t *testing.T, tok, prop string) int {
	t.Helper()
	key := fmt.Sprint("s-", submissions.Add(1))
	return b.submit(t, tok, key, fmt.Sprintf(`{"type":"shifting","params":{%q:1}}`, prop)).status
}

// While a new version of a type's schema is being compiled, submissions
// are validated against the previous one, without waiting for it; once it
// is compiled, against the new one.
func TestThePreviousSchemaServesUntilTheNewOneIsCompiled(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	pool := schemapool.NewWith(1, func(raw []byte) (*schema.Schema, error) {
		if bytes.Contains(raw, []byte(`"b"`)) {
			started <- struct{}{}
			<-release
		}
		return schema.Compile(raw)
	})
	b := compileSetup(t, pool)
	alice := b.token(t, "4", "alice", false)
	b.storeDecl(t, shifting("a", 2))
	require.Eventually(t, func() bool { return b.shiftingStatus(t, alice, "a") == http.StatusAccepted },
		10*time.Second, 10*time.Millisecond)

	b.storeDecl(t, shifting("b", 2))
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the new version was never compiled")
	}
	for range 5 {
		require.Equal(t, http.StatusAccepted, b.shiftingStatus(t, alice, "a"), "the previous version serves")
		require.Equal(t, http.StatusUnprocessableEntity, b.shiftingStatus(t, alice, "b"))
	}
	close(release)
	require.Eventually(t, func() bool { return b.shiftingStatus(t, alice, "b") == http.StatusAccepted },
		10*time.Second, 10*time.Millisecond)
	require.Equal(t, http.StatusUnprocessableEntity, b.shiftingStatus(t, alice, "a"))
	require.EqualValues(t, 2, pool.Compiles())
}

// A declaration whose schema and limits the gateway compiled already (an
// operator's pause rewrites the record, a new limit keeps the schema)
// compiles nothing.
func TestAnUnchangedSchemaIsNotCompiledAgain(t *testing.T) {
	t.Parallel()
	pool := schemapool.New(1)
	b := compileSetup(t, pool)
	alice := b.token(t, "4", "alice", false)
	b.storeDecl(t, shifting("a", 2))
	b.waitListed(t, alice, "shifting", func(m map[string]any) bool { return m != nil })
	require.EqualValues(t, 1, pool.Compiles())

	op := b.operator(t, "root")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/v1/admin/types/shifting/pause", op, "").status)
	b.waitListed(t, alice, "shifting", func(m map[string]any) bool { return m["paused"] == true })
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/v1/admin/types/shifting/resume", op, "").status)
	b.waitListed(t, alice, "shifting", func(m map[string]any) bool { return m["paused"] == false })
	require.EqualValues(t, 1, pool.Compiles(), "a pause and a resume compile nothing")

	b.storeDecl(t, shifting("a", 5))
	b.waitListed(t, alice, "shifting", func(m map[string]any) bool { return m["attempts"] == float64(5) })
	require.EqualValues(t, 1, pool.Compiles(), "new limits, the same schema")
	require.Equal(t, http.StatusAccepted, b.shiftingStatus(t, alice, "a"))
}

// Another spelling of the schema compiled already is not compiled again,
// and the type table counts the bytes of the spelling it keeps.
func TestAnotherSpellingOfTheSchemaIsNotCompiledAgain(t *testing.T) {
	t.Parallel()
	pool := schemapool.New(1)
	reg := newTypeRegistry(nil, slog.New(slog.DiscardHandler))
	reg.pool = pool
	reg.declare(testDecl("spelled", `{"type":"object","additionalProperties":false,"properties":{"n":{"type":"integer","maximum":3}}}`))
	longer := testDecl("spelled", `{"properties":{"n":{"maximum":3.000,"type":"integer"}},"additionalProperties":false,"type":"object"}`)
	reg.declare(longer)
	require.EqualValues(t, 1, pool.Compiles())
	d, _ := reg.decl("spelled")
	require.Equal(t, string(longer.Schema), string(d.Schema), "the declaration as stored last")
	require.Equal(t, declBytes(longer), reg.bytes)
}
