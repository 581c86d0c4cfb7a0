package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// fakeResults is a gateway stand-in with one succeeded job whose result is
// served with the given content type: enough for submit --wait and fetch.
func fakeResults(t *testing.T, id, contentType string, file []byte) *cliBundle {
	t.Helper()
	sum := sha256.Sum256(file)
	now := time.Now().UTC().Truncate(time.Second)
	res := (&job.Record{ID: id, Type: "csv_export", Params: json.RawMessage(`{}`), State: job.StateSucceeded, Attempt: 1,
		CreatedAt: now, UpdatedAt: now, StartedAt: &now, FinishedAt: &now,
		Output: &job.Output{Object: id, ContentType: contentType, Size: int64(len(file)), SHA256: hex.EncodeToString(sum[:])},
	}).Resource("", time.Time{})
	body, err := json.Marshal(res)
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/jobs":
			w.Header().Set("Location", job.JobPath(id))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write(body)
		case r.URL.Path == job.JobPath(id):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("ETag", `"1"`)
			_, _ = w.Write(body)
		case r.URL.Path == job.JobPath(id)+"/events":
			w.WriteHeader(http.StatusMethodNotAllowed) // no event stream: the client polls
		case r.URL.Path == job.JobPath(id)+"/result":
			w.Header().Set("Location", "/v1/results/signed")
			w.WriteHeader(http.StatusSeeOther)
		case r.URL.Path == "/v1/results/signed":
			w.Header().Set("Content-Type", contentType)
			_, _ = w.Write(file)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	b := &cliBundle{dir: dir, url: srv.URL, token: "t.t.t", journal: filepath.Join(dir, "journal.db")}
	b.env = map[string]string{"JOBGATE_URL": b.url, "JOBGATE_TOKEN": b.token, "JOBGATE_JOURNAL": b.journal, "HOME": dir}
	return b
}

// The file a result is saved to by default is named after the job and its
// content type, as the gateway names it: a CSV export is <id>.csv, not
// <id>.pdf; --out DIR puts that name in DIR, --out FILE is taken as is.
// Not parallel: it changes the working directory, where a default file
// name lands.
func TestResultFileNameFollowsContentType(t *testing.T) {
	const id = "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	csv := []byte("region,total\nnorth,12\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct{ contentType, ext string }{
		{"text/csv; charset=utf-8", ".csv"},
		{"application/pdf", ".pdf"},
		{"application/x-unheard-of", ".bin"},
	} {
		b := fakeResults(t, id, tc.contentType, csv)
		work := t.TempDir()
		t.Chdir(work)

		out, errOut, err := b.run(t, ctx, "fetch", id)
		require.NoError(t, err, errOut)
		require.Equal(t, id+tc.ext, strings.TrimSpace(out), tc.contentType)
		got, err := os.ReadFile(filepath.Join(work, id+tc.ext))
		require.NoError(t, err, tc.contentType)
		require.Equal(t, csv, got)

		sub := filepath.Join(work, "downloads")
		require.NoError(t, os.Mkdir(sub, 0o755))
		out, errOut, err = b.run(t, ctx, "submit", "--type", "csv_export", "--wait", "--out", sub)
		require.NoError(t, err, errOut)
		lines := outLines(out)
		require.Equal(t, []string{id, filepath.Join(sub, id+tc.ext)}, lines, tc.contentType)
		_, err = os.Stat(filepath.Join(sub, id+tc.ext))
		require.NoError(t, err)

		named := filepath.Join(work, "mine.dat")
		out, errOut, err = b.run(t, ctx, "fetch", id, "--out", named)
		require.NoError(t, err, errOut)
		require.Equal(t, named, strings.TrimSpace(out), "an explicit file name is kept")

		entries, err := os.ReadDir(work)
		require.NoError(t, err)
		for _, e := range entries {
			require.False(t, strings.HasSuffix(e.Name(), ".part"), "no temporary file left: %s", e.Name())
		}
	}
}
