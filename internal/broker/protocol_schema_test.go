package broker

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// The worker protocol's JSON Schemas (docs/protocol/*.schema.json) are the
// spec a worker in another language is written from: these tests keep them,
// the wire types, the samples of docs/protocol.md and the broker's own
// decoding from drifting apart.

const protocolDir = "../../docs/protocol"

// protocolSchemas compiles every schema of docs/protocol, formats asserted,
// by its file name without ".schema.json" (next.request, assignment, ...).
func protocolSchemas(t *testing.T) (map[string]*jsonschema.Schema, map[string]any) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(protocolDir, "*.schema.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 17, "a schema file a message")
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	docs := map[string]any{}
	ids := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		require.NoError(t, err, f)
		name := strings.TrimSuffix(filepath.Base(f), ".schema.json")
		id, _ := doc.(map[string]any)["$id"].(string)
		require.Equal(t, "https://jobgate.dev/protocol/w1/"+filepath.Base(f), id, "%s: its $id names its file", f)
		require.NoError(t, c.AddResource(id, doc))
		docs[name], ids[name] = doc, id
	}
	compiled := map[string]*jsonschema.Schema{}
	for name, id := range ids {
		s, err := c.Compile(id)
		require.NoError(t, err, name)
		compiled[name] = s
	}
	for name, doc := range docs {
		walkExamples(t, c, ids[name], "", doc)
	}
	return compiled, docs
}

// walkExamples validates every "examples" of a schema and its subschemas
// against the subschema that holds it.
func walkExamples(t *testing.T, c *jsonschema.Compiler, id, ptr string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		if ex, isList := v["examples"].([]any); isList && !strings.HasSuffix(ptr, "/properties") {
			s, err := c.Compile(id + "#" + ptr)
			require.NoError(t, err, "%s#%s", id, ptr)
			for i, e := range ex {
				require.NoError(t, s.Validate(e), "%s#%s: example %d", id, ptr, i)
			}
		}
		for k, sub := range v {
			walkExamples(t, c, id, ptr+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), sub)
		}
	case []any:
		for i, sub := range v {
			walkExamples(t, c, id, fmt.Sprintf("%s/%d", ptr, i), sub)
		}
	}
}

// valid reports whether data is valid against the named schema.
func valid(t *testing.T, schemas map[string]*jsonschema.Schema, name string, data []byte) error {
	t.Helper()
	s, known := schemas[name]
	require.True(t, known, "no schema %s", name)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	require.NoError(t, err, "%s: %s", name, data)
	return s.Validate(v)
}

func mustValid(t *testing.T, schemas map[string]*jsonschema.Schema, name string, v any) {
	t.Helper()
	data, ok := v.([]byte)
	if !ok {
		var err error
		data, err = json.Marshal(v)
		require.NoError(t, err)
	}
	require.NoError(t, valid(t, schemas, name, data), "%s: %s", name, data)
}

// TestProtocolSchemasCompileAndTheirExamplesHold: every schema compiles
// (draft 2020-12, formats asserted) and every example in it is valid.
func TestProtocolSchemasCompileAndTheirExamplesHold(t *testing.T) {
	t.Parallel()
	protocolSchemas(t)
}

// TestTheWireTypesMatchTheirSchemas: the Go implementation's messages,
// every field set as a worker or the broker sets it, are valid.
func TestTheWireTypesMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	s, _ := protocolSchemas(t)
	busy := 2
	held := wire.Held{Key: "4.reviewer-47.01JD8ZQ7M3T9V6X2K5R8P4N1C0", Token: "qJ0mE7ZrY3f1bXcV9kLw2sTu8aPd"}
	progress := &wire.Progress{Done: 1 << 40, Total: 1 << 40, Unit: "pages"}
	stored := &wire.StoredResult{Object: "01JD8ZQ7M3T9V6X2K5R8P4N1C0.a1", Size: 0, SHA256: strings.Repeat("e3", 32)}
	asg := &wire.Assignment{Key: held.Key, ID: "01JD8ZQ7M3T9V6X2K5R8P4N1C0", Type: "invoice_pdf", Tenant: "4", Requester: "reviewer-47",
		Attempt: 2, Attempts: 25, CreatedAt: time.Now(), Params: json.RawMessage(`{"invoice":"INV-1"}`), Token: held.Token,
		TimeoutMS: 86_400_000, BeatMS: 5000, LeaseMS: 14_000, MaxResultBytes: 4 << 30,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "jobgate=1"}
	for _, c := range []struct {
		schema string
		v      any
	}{
		{"declare.request", wire.DeclareRequest{Worker: "w-1@host:9", Type: wire.Declaration{Name: "invoice_pdf", Description: "d",
			Schema: json.RawMessage(`{"type":"object"}`), TimeoutSeconds: 86400, Attempts: 25, MaxResultBytes: 4 << 30, ContentType: "text/csv; charset=utf-8"}}},
		{"hello.request", wire.HelloRequest{Worker: "w", Concurrency: 1024, StartedAt: time.Now(), Busy: &busy}},
		{"hello.request", wire.HelloRequest{Worker: "w", Concurrency: 1, StartedAt: time.Now().In(time.FixedZone("x", 3600))}},
		{"bye.request", wire.HelloRequest{Worker: "w"}}, // pkg/worker's bye
		{"next.request", wire.NextRequest{Worker: "w", WaitMS: wire.MaxWait.Milliseconds()}},
		{"next.request", wire.NextRequest{Worker: "w", Newcomer: true, Running: []string{"4", "17"}}},
		{"beat.request", wire.BeatRequest{Held: held, Progress: progress}},
		{"beat.request", wire.BeatRequest{Held: held}},
		{"open.request", held},
		{"done.request", wire.DoneRequest{Held: held, Result: stored, Progress: progress, Next: &wire.NextRequest{Worker: "w"}}},
		{"done.request", wire.DoneRequest{Held: held}},
		{"fail.request", wire.FailRequest{Held: held, Kind: wire.KindBudget, Retryable: true, Message: "m", UserMessage: "u", RetryAfterMS: 1000}},
		{"giveback.request", wire.GiveBackRequest{Held: held, Reason: "shutdown"}},
		{"assignment", asg},
		{"next.answer", wire.Reply{Job: asg}},
		{"next.answer", ok},
		{"done.answer", wire.Reply{Job: asg}},
		{"open.answer", wire.Reply{Upload: &wire.UploadTarget{Host: "d1", ID: "5f0c9a7e21b4d3c8aa", Object: stored.Object}}},
		{"up.answer", wire.Reply{Stored: stored}},
		{"up.answer", ok},
		{"ok.reply", ok},
		{"ok.reply", wire.Reply{LeaseMS: 14_000}}, // a beat's ok
		{"error.reply", refuse(wire.CodeLost, "x")},
		{"error.reply", wire.Reply{Error: &wire.Error{Code: wire.CodeLost, Message: "canceled"}, Canceled: true}},
		{"error.reply", wire.Reply{Error: &wire.Error{Code: wire.CodeTooLarge, Message: "quota"}, Failed: true}},
		{"error.reply", throttled(time.Microsecond, "declarations")},
	} {
		mustValid(t, s, c.schema, c.v)
	}
	for _, k := range []string{wire.KindError, wire.KindPermanent, wire.KindTimeout, wire.KindTooLarge, wire.KindInternal,
		wire.KindBudget, wire.KindPanic, wire.KindEndpointRejected, wire.KindEndpointError} {
		mustValid(t, s, "fail.request", wire.FailRequest{Held: held, Kind: k})
	}
	for _, code := range []string{wire.CodeBadRequest, wire.CodeForbidden, wire.CodeInvalid, wire.CodeLost, wire.CodeTooLarge,
		wire.CodeUnavailable, wire.CodeThrottled, wire.CodeUnknown} {
		mustValid(t, s, "error.reply", refuse(code, "x"))
	}
	data, err := json.Marshal(ok)
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(data), "ok is the empty object")
	// canceled and failed sit beside error, never inside it, and only with
	// their codes.
	require.Error(t, valid(t, s, "error.reply", []byte(`{"error":{"code":"lost","message":"x","canceled":true}}`)), "canceled inside error")
	require.Error(t, valid(t, s, "error.reply", []byte(`{"error":{"code":"unavailable","message":"x"},"canceled":true}`)))
	require.Error(t, valid(t, s, "error.reply", []byte(`{"error":{"code":"lost","message":"x"},"failed":true}`)))
	require.Error(t, valid(t, s, "error.reply", []byte(`{"error":{"code":"lost","message":"x","retry_after_ms":5}}`)))
	require.Error(t, valid(t, s, "ok.reply", []byte(`{"error":{"code":"lost","message":"x"}}`)))
}

// docSample is a fenced block of docs/protocol.md: ```json <schema>.
var docSample = regexp.MustCompile("(?s)```json([^\\n]*)\\n(.*?)```")

// TestTheProtocolsSamplesMatchTheirSchemas: every JSON sample of
// docs/protocol.md names its schema and is valid against it.
func TestTheProtocolsSamplesMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	s, _ := protocolSchemas(t)
	doc, err := os.ReadFile("../../docs/protocol.md")
	require.NoError(t, err)
	samples := docSample.FindAllStringSubmatch(string(doc), -1)
	require.GreaterOrEqual(t, len(samples), 20, "the sample exchanges")
	seen := map[string]bool{}
	for _, m := range samples {
		name := strings.TrimSpace(m[1])
		require.NotEmpty(t, name, "a json sample names its schema: ```json next.request\n%s", m[2])
		require.NoError(t, valid(t, s, name, []byte(m[2])), "%s sample:\n%s", name, m[2])
		seen[name] = true
	}
	for name := range s {
		if name != "defs" && name != "ok.reply" {
			require.True(t, seen[name], "docs/protocol.md has a sample of %s", name)
		}
	}
}

// askRaw sends one request and returns the reply's bytes.
func (tb *testBundle) askRaw(t *testing.T, cred, typ, op string, data []byte) []byte {
	t.Helper()
	msg, err := tb.conn.NC.Request(wire.Subject(cred, typ, op), data, 15*time.Second)
	require.NoError(t, err)
	return msg.Data
}

// exchange sends a request valid against its schema, and checks that the
// answer is valid against answer's schema (or error.reply when refused).
func (tb *testBundle) exchange(t *testing.T, s map[string]*jsonschema.Schema, cred, typ, op string, req any, answer string) *wire.Reply {
	t.Helper()
	data, err := json.Marshal(req)
	require.NoError(t, err)
	mustValid(t, s, op+".request", data)
	raw := tb.askRaw(t, cred, typ, op, data)
	var reply wire.Reply
	require.NoError(t, json.Unmarshal(raw, &reply))
	if reply.Error != nil {
		mustValid(t, s, "error.reply", raw)
	} else {
		mustValid(t, s, answer, raw)
	}
	return &reply
}

// TestABrokersAnswersMatchTheirSchemas runs a whole job, a failure and a
// refused oversize upload against a real broker, checking every request
// and every answer against its schema, and that an ok is exactly {}.
func TestABrokersAnswersMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	s, _ := protocolSchemas(t)
	_, tb := setup(t)
	decl := wire.DeclareRequest{Worker: "w-1", Type: wire.Declaration{Name: "invoice_pdf",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`), TimeoutSeconds: 60, Attempts: 2,
		MaxResultBytes: 10, ContentType: "application/pdf"}}
	require.Nil(t, tb.exchange(t, s, credA, "invoice_pdf", wire.OpDeclare, decl, "ok.reply").Error)
	raw := tb.askRaw(t, credA, "invoice_pdf", wire.OpHello, mustJSON(t, wire.HelloRequest{Worker: "w-1", Concurrency: 1, StartedAt: time.Now()}))
	require.JSONEq(t, `{}`, string(raw), "ok is {}")

	rec := tb.admit(t, "invoice_pdf", "s-1")
	var a *wire.Assignment
	for deadline := time.Now().Add(10 * time.Second); a == nil && time.Now().Before(deadline); {
		r := tb.exchange(t, s, credA, "invoice_pdf", wire.OpNext, wire.NextRequest{Worker: "w-1", WaitMS: 2000}, "next.answer")
		require.Nil(t, r.Error)
		a = r.Job
	}
	require.NotNil(t, a)
	held := wire.Held{Key: a.Key, Token: a.Token}
	require.Nil(t, tb.exchange(t, s, credA, "invoice_pdf", wire.OpBeat, wire.BeatRequest{Held: held, Progress: &wire.Progress{Done: 1, Total: 2, Unit: "pages"}}, "ok.reply").Error)

	// too_large comes on the chunk that passes max_result_bytes (10), not
	// on the last; the upload is gone after it.
	open := tb.exchange(t, s, credA, "invoice_pdf", wire.OpOpen, held, "open.answer")
	require.NotNil(t, open.Upload)
	chunk := func(u *wire.UploadTarget, seq int, data string, last bool) *wire.Reply {
		m := nats.NewMsg(wire.UploadSubject(credA, "invoice_pdf", u.Host, u.ID))
		m.Data = []byte(data)
		m.Header.Set(wire.HeaderSeq, itoa(seq))
		if last {
			m.Header.Set(wire.HeaderLast, "1")
		}
		resp, err := tb.conn.NC.RequestMsg(m, 15*time.Second)
		require.NoError(t, err)
		var reply wire.Reply
		require.NoError(t, json.Unmarshal(resp.Data, &reply))
		if reply.Error != nil {
			mustValid(t, s, "error.reply", resp.Data)
		} else {
			mustValid(t, s, "up.answer", resp.Data)
		}
		return &reply
	}
	require.Nil(t, chunk(open.Upload, 0, "123456", false).Error)
	r := chunk(open.Upload, 1, "78901", false)
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeTooLarge, r.Error.Code, "refused on the chunk past the limit")
	require.False(t, r.Failed, "the type's limit: the worker reports the failure")
	gone := nats.NewMsg(wire.UploadSubject(credA, "invoice_pdf", open.Upload.Host, open.Upload.ID))
	gone.Header.Set(wire.HeaderSeq, "2")
	if resp, err := tb.conn.NC.RequestMsg(gone, 15*time.Second); err == nil {
		require.JSONEq(t, `{"error":{"code":"unknown","message":"no such upload"}}`, string(resp.Data), "the upload is gone")
	} else {
		require.ErrorIs(t, err, nats.ErrNoResponders, "the upload is gone")
	}

	// Stored again, within the limit: the result is the stored bytes.
	open = tb.exchange(t, s, credA, "invoice_pdf", wire.OpOpen, held, "open.answer")
	require.Nil(t, chunk(open.Upload, 0, "%PDF-", false).Error)
	last := chunk(open.Upload, 1, "1.7", true)
	require.NotNil(t, last.Stored)
	sum := sha256.Sum256([]byte("%PDF-1.7"))
	require.Equal(t, hex.EncodeToString(sum[:]), last.Stored.SHA256)
	require.Nil(t, tb.exchange(t, s, credA, "invoice_pdf", wire.OpDone, wire.DoneRequest{Held: held, Result: last.Stored, Next: &wire.NextRequest{Worker: "w-1"}}, "done.answer").Error)
	require.Equal(t, job.StateSucceeded, tb.record(t, rec.Key()).State)
	// The same claim after its verdict: lost, and the schema's shape.
	require.Equal(t, wire.CodeLost, tb.exchange(t, s, credA, "invoice_pdf", wire.OpBeat, wire.BeatRequest{Held: held}, "ok.reply").Error.Code)

	// A failure, then a give-back and a cancel's answer.
	failing := tb.admit(t, "invoice_pdf", "s-2")
	b := tb.next(t, credA, "invoice_pdf", "w-1")
	require.Equal(t, failing.Key(), b.Key)
	require.Nil(t, tb.exchange(t, s, credA, "invoice_pdf", wire.OpFail, wire.FailRequest{Held: wire.Held{Key: b.Key, Token: b.Token},
		Kind: wire.KindPermanent, Message: "not found", UserMessage: "No such invoice."}, "ok.reply").Error)
	require.Equal(t, job.StateFailed, tb.record(t, failing.Key()).State)

	back := tb.admit(t, "invoice_pdf", "s-3")
	c := tb.next(t, credA, "invoice_pdf", "w-1")
	require.Equal(t, back.Key(), c.Key)
	require.Nil(t, tb.exchange(t, s, credA, "invoice_pdf", wire.OpGiveBack, wire.GiveBackRequest{Held: wire.Held{Key: c.Key, Token: c.Token}, Reason: "shutdown"}, "ok.reply").Error)
	require.Nil(t, tb.exchange(t, s, credA, "invoice_pdf", wire.OpBye, wire.HelloRequest{Worker: "w-1"}, "ok.reply").Error)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// TestWhatTheSchemasRefuseTheBrokerRefuses sends a real broker, for each
// request, variants of a valid request that break one rule each: the
// schema rejects every one, and the broker answers bad_request (invalid
// for a declaration's limits) and changes nothing.
func TestWhatTheSchemasRefuseTheBrokerRefuses(t *testing.T) {
	t.Parallel()
	s, _ := protocolSchemas(t)
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "report", "text/csv").Error)
	rec := tb.admit(t, "report", "v-1")
	a := tb.next(t, credA, "report", "w-1")
	key, token := fmt.Sprintf("%q", a.Key), fmt.Sprintf("%q", a.Token)
	held := `"key":` + key + `,"token":` + token
	open := tb.ask(t, credA, "report", wire.OpOpen, wire.Held{Key: a.Key, Token: a.Token})
	require.Nil(t, open.Error)
	stored := tb.chunk(t, credA, "report", open.Upload, 0, []byte("a,b\n"), true).Stored
	require.NotNil(t, stored)
	result := func(size int64, sum string) string {
		return fmt.Sprintf(`{%s,"result":{"object":%q,"size":%d,"sha256":%q}}`, held, stored.Object, size, sum)
	}
	declare := func(worker, field string) string {
		return `{"worker":` + worker + `,"type":{"name":"invoice","schema":{"type":"object","additionalProperties":false},"timeout_seconds":60,"attempts":2,` +
			`"max_result_bytes":1024,"content_type":"application/pdf"` + field + `}}`
	}
	for _, c := range []struct {
		op, why, body, code string
	}{
		{wire.OpDeclare, "a worker name with a space", declare(`"w 1"`, ""), wire.CodeBadRequest},
		{wire.OpDeclare, "no worker", declare(`""`, ""), wire.CodeBadRequest},
		{wire.OpDeclare, "timeout_seconds 0", declare(`"w"`, `,"timeout_seconds":0`), wire.CodeInvalid},
		{wire.OpDeclare, "timeout past 24 h", declare(`"w"`, `,"timeout_seconds":86401`), wire.CodeInvalid},
		{wire.OpDeclare, "26 attempts", declare(`"w"`, `,"attempts":26`), wire.CodeInvalid},
		{wire.OpDeclare, "max_result_bytes 0", declare(`"w"`, `,"max_result_bytes":0`), wire.CodeInvalid},
		{wire.OpDeclare, "max_result_bytes past 4 GiB", declare(`"w"`, `,"max_result_bytes":4294967297`), wire.CodeInvalid},
		{wire.OpDeclare, "a bare content type", declare(`"w"`, `,"content_type":"pdf"`), wire.CodeInvalid},
		{wire.OpDeclare, "a wildcard content type", declare(`"w"`, `,"content_type":"application/*"`), wire.CodeInvalid},
		{wire.OpDeclare, "a description past 1024 bytes", declare(`"w"`, `,"description":"`+strings.Repeat("d", 1025)+`"`), wire.CodeInvalid},
		{wire.OpDeclare, "a schema that is not an object", declare(`"w"`, `,"schema":5`), wire.CodeInvalid},
		{wire.OpDeclare, "a string for attempts", declare(`"w"`, `,"attempts":"2"`), wire.CodeBadRequest},

		{wire.OpHello, "a worker name with a space", `{"worker":"w 1","concurrency":1,"started_at":"2026-12-04T17:21:08Z"}`, wire.CodeBadRequest},
		{wire.OpHello, "concurrency 0", `{"worker":"w","concurrency":0,"started_at":"2026-12-04T17:21:08Z"}`, wire.CodeBadRequest},
		{wire.OpHello, "concurrency 1025", `{"worker":"w","concurrency":1025,"started_at":"2026-12-04T17:21:08Z"}`, wire.CodeBadRequest},
		{wire.OpHello, "busy -1", `{"worker":"w","concurrency":1,"started_at":"2026-12-04T17:21:08Z","busy":-1}`, wire.CodeBadRequest},
		{wire.OpHello, "busy 2049", `{"worker":"w","concurrency":1,"started_at":"2026-12-04T17:21:08Z","busy":2049}`, wire.CodeBadRequest},
		{wire.OpHello, "started_at not RFC 3339", `{"worker":"w","concurrency":1,"started_at":"04/12/2026 17:21"}`, wire.CodeBadRequest},

		{wire.OpBye, "a worker name of 129 bytes", `{"worker":"` + strings.Repeat("w", 129) + `"}`, wire.CodeBadRequest},

		{wire.OpNext, "a worker name with a space", `{"worker":"w 1","wait_ms":100}`, wire.CodeBadRequest},
		{wire.OpNext, "a negative wait_ms", `{"worker":"w","wait_ms":-1}`, wire.CodeBadRequest},
		{wire.OpNext, "wait_ms past 10000", `{"worker":"w","wait_ms":10001}`, wire.CodeBadRequest},
		{wire.OpNext, "wait_ms as a string", `{"worker":"w","wait_ms":"100"}`, wire.CodeBadRequest},
		{wire.OpNext, "1025 running tenants", `{"worker":"w","newcomer":true,"running":["` + strings.Repeat(`t","`, 1024) + `t"]}`, wire.CodeBadRequest},

		{wire.OpBeat, "a negative progress", `{` + held + `,"progress":{"done":-1,"total":2}}`, wire.CodeBadRequest},
		{wire.OpBeat, "a progress past 2^40", `{` + held + `,"progress":{"done":1,"total":1099511627777}}`, wire.CodeBadRequest},
		{wire.OpBeat, "a unit of 33 bytes", `{` + held + `,"progress":{"done":1,"total":2,"unit":"` + strings.Repeat("u", 33) + `"}}`, wire.CodeBadRequest},
		{wire.OpBeat, "a unit with a newline", `{` + held + `,"progress":{"done":1,"total":2,"unit":"a\nb"}}`, wire.CodeBadRequest},
		{wire.OpBeat, "a key that is no job's", `{"key":"4.reviewer-47","token":` + token + `}`, wire.CodeBadRequest},

		{wire.OpOpen, "a key past 256 bytes", `{"key":"4.r.` + strings.Repeat("k", 255) + `","token":` + token + `}`, wire.CodeBadRequest},
		{wire.OpOpen, "a token past 64 bytes", `{"key":` + key + `,"token":"` + strings.Repeat("t", 65) + `"}`, wire.CodeBadRequest},

		{wire.OpDone, "an uppercase sha256", result(stored.Size, strings.ToUpper(stored.SHA256)), wire.CodeBadRequest},
		{wire.OpDone, "a negative size", result(-1, stored.SHA256), wire.CodeBadRequest},
		{wire.OpDone, "a progress past its bound", `{` + held + `,"progress":{"done":1099511627777,"total":1}}`, wire.CodeBadRequest},

		{wire.OpFail, "an unknown kind", `{` + held + `,"kind":"oops","message":"m"}`, wire.CodeBadRequest},
		{wire.OpFail, "no kind", `{` + held + `,"message":"m"}`, wire.CodeBadRequest},
		{wire.OpFail, "a user message with a newline", `{` + held + `,"kind":"permanent","message":"m","user_message":"a\nb"}`, wire.CodeBadRequest},
		{wire.OpFail, "a negative retry_after_ms", `{` + held + `,"kind":"error","message":"m","retry_after_ms":-1}`, wire.CodeBadRequest},
		{wire.OpFail, "retryable as a string", `{` + held + `,"kind":"budget","message":"m","retryable":"yes"}`, wire.CodeBadRequest},

		{wire.OpGiveBack, "a key that is no job's", `{"key":"nokey","token":` + token + `,"reason":"shutdown"}`, wire.CodeBadRequest},
		{wire.OpGiveBack, "a token past 64 bytes", `{"key":` + key + `,"token":"` + strings.Repeat("t", 65) + `"}`, wire.CodeBadRequest},
	} {
		require.Error(t, valid(t, s, c.op+".request", []byte(c.body)), "%s, %s: the schema refuses it", c.op, c.why)
		typ := "report"
		if c.op == wire.OpDeclare {
			typ = "invoice"
		}
		raw := tb.askRaw(t, credA, typ, c.op, []byte(c.body))
		mustValid(t, s, "error.reply", raw)
		var reply wire.Reply
		require.NoError(t, json.Unmarshal(raw, &reply))
		require.NotNil(t, reply.Error, "%s, %s: the broker refuses it", c.op, c.why)
		require.Equal(t, c.code, reply.Error.Code, "%s, %s: %s", c.op, c.why, reply.Error.Message)
	}
	// The requests the variants were made from are accepted.
	require.NoError(t, valid(t, s, "declare.request", []byte(declare(`"w"`, ""))))
	var reply wire.Reply
	require.NoError(t, json.Unmarshal(tb.askRaw(t, credA, "invoice", wire.OpDeclare, []byte(declare(`"w"`, ""))), &reply))
	require.Nil(t, reply.Error)
	// None of it touched the claim: the job is running at its attempt, and
	// the claim's own requests still stand.
	got := tb.record(t, rec.Key())
	require.Equal(t, job.StateRunning, got.State)
	require.Equal(t, 1, got.Attempt)
	r := tb.ask(t, credA, "report", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}, Result: stored})
	require.Nil(t, r.Error)
	require.Equal(t, job.StateSucceeded, tb.record(t, rec.Key()).State)
}
