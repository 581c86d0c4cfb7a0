package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// Issue 22: declarations are bounded. A worker is untrusted: its schemas
// must not make a submission cost seconds, and its declarations must not
// fill the gateway's memory or crowd out the built-in types.

// testDecl is a declaration with a schema and the usual limits.
func testDecl(name, schemaJSON string) *job.TypeDecl {
	return &job.TypeDecl{Name: name, Schema: json.RawMessage(schemaJSON), TimeoutSeconds: 60, Attempts: 2,
		MaxResultBytes: 1 << 20, ContentType: "text/plain", DeclaredAt: time.Now().UTC()}
}

// enumListSchema takes xs, up to 200 items each one of 2,000 numbers: it
// compiles (with 65,536 items its worst case is refused), and every item
// costs the validator 2,000 comparisons that each parse two big.Rats.
var enumListSchema = func() string {
	vals := make([]string, 2000)
	for i := range vals {
		vals[i] = fmt.Sprint(i)
	}
	return `{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":200,"items":{"enum":[` + strings.Join(vals, ",") + `]}}}}`
}()

// allOfBomb is the 1.6 KB schema of issue 22 (fan-out 2, depth 24).
func allOfBomb() string {
	defs := make([]string, 0, 25)
	for i := range 24 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"d24":{"type":"integer"}`)
	return `{"type":"object","additionalProperties":false,"properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

func repeatList(item string, n int) string {
	return strings.TrimSuffix(strings.Repeat(item+",", n), ",")
}

// putDecl writes a declaration straight into JOBGATE_TYPES, as a worker
// that skips the worker package's checks could.
func putDecl(t *testing.T, kv jetstream.KeyValue, d *job.TypeDecl) {
	t.Helper()
	data, err := json.Marshal(d)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kv.Put(ctx, d.Name, data)
	require.NoError(t, err)
}

func typesBucket(t *testing.T, b *testBundle) jetstream.KeyValue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := b.res.JS.KeyValue(ctx, natsjs.BucketTypes)
	require.NoError(t, err)
	return kv
}

// awaitType waits until the gateway answers GET /v1/types/{name}.
func (b *testBundle) awaitType(t *testing.T, tok, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		return b.do(t, http.MethodGet, "/v1/types/"+name, tok, "").status == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond, "type %s not accepted", name)
}

// The schema bomb of issue 22, written straight into the bucket, is
// refused by the gateway's compiler: its submissions answer 422 at once
// (an unknown type), never 503 after 34 s, and leave the key unused.
// Before, the gateway took it and each submission validated for about a
// minute, then answered 503 "retry with the same key".
func TestSchemaBombDeclarationIsRefused(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	kv := typesBucket(t, b)
	putDecl(t, kv, testDecl("bomb", allOfBomb()))
	putDecl(t, kv, testDecl("after_bomb", `{"type":"object","additionalProperties":false}`))
	b.awaitType(t, tok, "after_bomb") // the watch is past the bomb
	r := b.do(t, http.MethodGet, "/v1/types/bomb", tok, "")
	require.Equal(t, http.StatusNotFound, r.status)

	start := time.Now()
	r = b.submit(t, tok, "bomb-1", `{"type":"bomb","params":{"x":1}}`)
	// Far under the 34 s it took before the bound; loose for a loaded machine.
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	require.Equal(t, "/problems/validation", r.json(t)["type"])
	r = b.submit(t, tok, "bomb-1", permit)
	require.Equal(t, http.StatusAccepted, r.status, "the key was not consumed: %s", r.body)
}

// Params that would cost more than the validation budget answer 422
// validation (rule "cost") at once, and leave the key unused; params of
// the same type within it are admitted. Before, 6,000 items of a
// 2,000-number enum validated for 30 s, after which the admission's 5 s
// were spent and the client got 503 "retry with the same key".
func TestCostlyParamsAnswer422(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	jobtest.DeclareTypes(t, b.res, testDecl("enum_list", enumListSchema))
	b.awaitType(t, tok, "enum_list")

	start := time.Now()
	r := b.submit(t, tok, "costly-1", `{"type":"enum_list","params":{"xs":[`+repeatList("1999", 6000)+`]}}`)
	require.Less(t, time.Since(start), 10*time.Second) // 30 s before the bound
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%.300s", r.body)
	p := r.json(t)
	require.Equal(t, "/problems/validation", p["type"])
	errs := p["errors"].([]any)
	require.Len(t, errs, 1)
	require.Equal(t, "/params", errs[0].(map[string]any)["field"])
	require.Equal(t, "cost", errs[0].(map[string]any)["rule"])

	r = b.submit(t, tok, "costly-1", `{"type":"enum_list","params":{"xs":[1,2,1999]}}`)
	require.Equal(t, http.StatusAccepted, r.status, "the key was not consumed: %s", r.body)
}

// deadlineRecords is a record store in memory that notes how much of its
// context's time is left at each Create.
type deadlineRecords struct {
	*memRecords
	mu   sync.Mutex
	left []time.Duration
}

func (s *deadlineRecords) Create(ctx context.Context, r *job.Record) error {
	if dl, ok := ctx.Deadline(); ok {
		s.mu.Lock()
		s.left = append(s.left, time.Until(dl))
		s.mu.Unlock()
	}
	return s.memRecords.Create(ctx, r)
}

// declTypes is a type source of fixed declarations and no workers.
type declTypes []*job.TypeDecl

func (d declTypes) WatchTypes(_ context.Context, fn func(*natsjs.TypeChange)) error {
	for _, decl := range d {
		fn(&natsjs.TypeChange{Decl: decl})
	}
	fn(nil)
	return nil
}

func (declTypes) WatchWorkers(_ context.Context, fn func(string, *natsjs.Presence)) error {
	fn("", nil)
	return nil
}

// The admission's timeout starts once the params are validated: the
// store's first call has all of admitTimeout left, however long the
// validation took. Before, the validation's time came off it.
func TestAdmissionTimeoutStartsAfterValidation(t *testing.T) {
	t.Parallel()
	ints := testDecl("many_ints", `{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":65536,"items":{"type":"integer"}}}}`)
	store := &deadlineRecords{memRecords: &memRecords{m: map[string]*job.Record{}}}
	secret := []byte("0123456789abcdef0123456789abcdef")
	st := memStores(store, &failingWork{})
	st.Types, st.Changes = declTypes{jobtest.PermitReport(), ints}, noChanges{fmt.Errorf("none")}
	g, err := newGateway(Config{AuthSecret: secret}, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NoError(t, g.Init(context.Background()))
	t.Cleanup(func() { _ = g.Stop(context.Background()) })
	tok, err := auth.Mint(secret, auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour, time.Now())
	require.NoError(t, err)

	// Within the validation budget, and slow: about 30 ms (more under the
	// race detector).
	body := `{"type":"many_ints","params":{"xs":[` + repeatList("7", 30000) + `]}}`
	var took time.Duration
	for range 3 { // the least of three: a stall is not the validation
		start := time.Now()
		_, err := job.DecodeSubmission([]byte(body), g.types.schemas)
		require.NoError(t, err)
		if d := time.Since(start); took == 0 || d < took {
			took = d
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "slow-1")
	resp, err := g.App().Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Len(t, store.left, 1)
	require.Greater(t, store.left[0], admitTimeout-took/2, "validation took %s", took)
}

// A bounded type table: built-in types are always taken, even past the
// count or the byte budget; other types are refused past either, new
// versions of a known type too (the old one stays), and a removal makes
// room. Before, permit_report was refused once MaxTypes others were known.
func TestBuiltinTypesAreNeverRefused(t *testing.T) {
	t.Parallel()
	reg := newTypeRegistry(nil, slog.New(slog.DiscardHandler))
	small := `{"type":"object","additionalProperties":false}`
	for i := range job.MaxTypes {
		reg.declare(testDecl(fmt.Sprintf("t%d", i), small))
	}
	reg.declare(jobtest.PermitReport())
	_, ok := reg.schemas.Lookup("permit_report")
	require.True(t, ok, "permit_report is taken past the count")

	reg = newTypeRegistry(nil, slog.New(slog.DiscardHandler))
	big := `{"type":"object","additionalProperties":false,"description":"` + strings.Repeat("x", 30000) + `"}`
	n := 0
	for ; n < 1000; n++ {
		reg.declare(testDecl(fmt.Sprintf("big%d", n), big))
		if _, ok := reg.decl(fmt.Sprintf("big%d", n)); !ok {
			break
		}
	}
	require.Equal(t, maxTypeBytes/len(big), n, "big types until the byte budget")
	require.LessOrEqual(t, reg.bytes, maxTypeBytes)
	fill := maxTypeBytes - reg.bytes - 10 // the room left, but for 10 bytes
	filler := testDecl("filler", `{"type":"object","additionalProperties":false,"description":"`+strings.Repeat("f", fill-len(small)-len(`,"description":""`))+`"}`)
	reg.declare(filler)
	_, ok = reg.decl("filler")
	require.True(t, ok)
	require.Equal(t, maxTypeBytes-10, reg.bytes)
	reg.declare(jobtest.PermitReport())
	_, ok = reg.schemas.Lookup("permit_report")
	require.True(t, ok, "permit_report is taken past the byte budget")
	require.Greater(t, reg.bytes, maxTypeBytes)

	grown := testDecl("big0", `{"type":"object","additionalProperties":false,"description":"`+strings.Repeat("y", 31000)+`"}`)
	reg.declare(grown)
	d, _ := reg.decl("big0")
	require.Equal(t, big, string(d.Schema), "a new version past the budget keeps the old one")

	reg.remove("big1")
	reg.declare(grown)
	d, _ = reg.decl("big0")
	require.Equal(t, string(grown.Schema), string(d.Schema), "a removal made room")
}

// Junk declared straight into the bucket, a thousand of about 5 KB each
// and crumbs that fill the room left, after a legitimate type and before
// permit_report's latest version, then a liar whose DeclaredAt claims
// 1970: the gateway keeps at most the byte
// budget of them, in the order they were stored, and after a restart (a
// new gateway on the same store) permit_report still loads first and is
// accepted, the earlier type is still there and the liar is not. Before,
// the junk loaded first after a restart and the count cap refused
// permit_report.
func TestTypeTableBudgetSurvivesARestart(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	kv := typesBucket(t, b)
	putDecl(t, kv, testDecl("early_type", `{"type":"object","additionalProperties":false}`))
	junk := `{"type":"object","additionalProperties":false,"description":"` + strings.Repeat("j", 5000) + `"}`
	const junkTypes = 1000
	for i := range junkTypes {
		putDecl(t, kv, testDecl(fmt.Sprintf("junk_%04d", i), junk))
	}
	// Crumbs fill what room the junk leaves, to less than permit_report's
	// size.
	crumb := `{"type":"object","additionalProperties":false,"description":"` + strings.Repeat("c", 150) + `"}`
	for i := range 40 {
		putDecl(t, kv, testDecl(fmt.Sprintf("crumb_%02d", i), crumb))
	}
	permitAgain := jobtest.PermitReport()
	permitAgain.Description += " (again)"
	permitAgain.DeclaredAt = time.Now().UTC()
	putDecl(t, kv, permitAgain)
	liar := testDecl("liar_type", `{"type":"object","additionalProperties":false,"description":"`+strings.Repeat("l", 20000)+`"}`)
	liar.DeclaredAt = time.Unix(0, 0).UTC()
	putDecl(t, kv, liar)

	check := func(when string) {
		t.Helper()
		names := b.typeNames(t, tok)
		require.Contains(t, names, "permit_report", when)
		require.Contains(t, names, "early_type", when)
		require.NotContains(t, names, "liar_type", when)
		var kept []string
		for _, n := range names {
			if strings.HasPrefix(n, "junk_") {
				kept = append(kept, n)
			}
		}
		require.NotEmpty(t, kept, when)
		require.Less(t, len(kept), junkTypes, when)
		require.LessOrEqual(t, len(kept)*(len(junk)), maxTypeBytes, when)
		for i, n := range kept { // the first ones declared
			require.Equal(t, fmt.Sprintf("junk_%04d", i), n, when)
		}
		r := b.submit(t, tok, "after-junk-"+when, permit)
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, r.status, "%s: %s", when, r.body)
		r = b.do(t, http.MethodGet, "/v1/types/permit_report", tok, "")
		require.Equal(t, http.StatusOK, r.status, when)
	}
	// Live, the new version of permit_report is taken though the table
	// is full.
	require.Eventually(t, func() bool {
		return b.do(t, http.MethodGet, "/v1/types/permit_report", tok, "").json(t)["description"] == permitAgain.Description
	}, 30*time.Second, 50*time.Millisecond)
	check("live")

	// The restart declares permit_report again, as the renderer does.
	b.stop()
	b.start(t)
	check("restarted")
}

// typeNames reads every page of GET /v1/types and checks the pages: by
// name, at most limit each, without schemas, a next_cursor until the last.
func (b *testBundle) typeNames(t *testing.T, tok string) []string {
	t.Helper()
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 50)
		path := "/v1/types?limit=200"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := b.do(t, http.MethodGet, path, tok, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var page struct {
			Types      []map[string]any `json:"types"`
			NextCursor string           `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(r.body, &page))
		require.LessOrEqual(t, len(page.Types), 200)
		for _, ty := range page.Types {
			require.NotContains(t, ty, "schema")
			names = append(names, ty["name"].(string))
		}
		if page.NextCursor == "" {
			break
		}
		require.Len(t, page.Types, 200)
		cursor = page.NextCursor
	}
	require.IsIncreasing(t, names)
	return names
}

// GET /v1/types pages by name (default 50, at most 200) and leaves the
// schemas out; GET /v1/types/{name} answers one type with its schema.
// Before, the list held every type with its schema (32.6 MB with 1,005
// declarations of 32 KB).
func TestTypesListPages(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	decls := make([]*job.TypeDecl, 120)
	for i := range decls {
		decls[i] = testDecl(fmt.Sprintf("type_%03d", i), `{"type":"object","additionalProperties":false,"properties":{"n":{"type":"integer","default":`+fmt.Sprint(i)+`}}}`)
	}
	jobtest.DeclareTypes(t, b.res, decls...)
	b.awaitType(t, tok, "type_119")

	var seen []string
	cursor := ""
	for _, want := range []int{50, 50, 21} { // 120 and permit_report
		path := "/v1/types"
		if cursor != "" {
			path += "?cursor=" + cursor
		}
		r := b.do(t, http.MethodGet, path, tok, "")
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "private, no-cache", r.header.Get("Cache-Control"))
		var page struct {
			Types      []map[string]any `json:"types"`
			NextCursor string           `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(r.body, &page))
		require.Len(t, page.Types, want)
		for _, ty := range page.Types {
			require.NotContains(t, ty, "schema")
			require.Equal(t, "/v1/types/"+ty["name"].(string), ty["links"].(map[string]any)["self"])
			require.Positive(t, ty["schema_bytes"])
			seen = append(seen, ty["name"].(string))
		}
		cursor = page.NextCursor
		if want < 50 {
			require.Empty(t, cursor)
		} else {
			require.NotEmpty(t, cursor)
		}
	}
	require.Len(t, seen, 121)
	require.IsIncreasing(t, seen)
	require.Equal(t, seen, b.typeNames(t, tok))

	r := b.do(t, http.MethodGet, "/v1/types/type_007", tok, "")
	require.Equal(t, http.StatusOK, r.status)
	one := r.json(t)
	require.Equal(t, "type_007", one["name"])
	require.EqualValues(t, 7, one["schema"].(map[string]any)["properties"].(map[string]any)["n"].(map[string]any)["default"])
	require.EqualValues(t, 2, one["attempts"])

	for _, path := range []string{"/v1/types/nope", "/v1/types/NOT-A-NAME"} {
		r = b.do(t, http.MethodGet, path, tok, "")
		require.Equal(t, http.StatusNotFound, r.status, path)
		require.Equal(t, "/problems/not-found", r.json(t)["type"])
	}
	for _, path := range []string{"/v1/types?limit=0", "/v1/types?limit=201", "/v1/types?limit=x", "/v1/types?cursor=bogus", "/v1/types?cursor=t1.QUJD"} {
		r = b.do(t, http.MethodGet, path, tok, "")
		require.Equal(t, http.StatusBadRequest, r.status, path)
	}
	r = b.do(t, http.MethodGet, "/v1/types/type_007", "", "")
	require.Equal(t, http.StatusUnauthorized, r.status)
}
