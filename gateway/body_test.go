package gateway

import (
	"bytes"
	"compress/gzip"
	"io"
	"mime/multipart"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// gzipBomb is a body of a few hundred bytes that, decoded through both of its
// gzip layers, is 256 MiB of zeros.
func gzipBomb(t *testing.T) []byte {
	t.Helper()
	var inner bytes.Buffer
	zw, err := gzip.NewWriterLevel(&inner, gzip.BestCompression)
	require.NoError(t, err)
	zeros := make([]byte, 1<<20)
	for range 256 {
		_, err := zw.Write(zeros)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	var outer bytes.Buffer
	zw, err = gzip.NewWriterLevel(&outer, gzip.BestCompression)
	require.NoError(t, err)
	_, err = zw.Write(inner.Bytes())
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.Less(t, outer.Len(), 4<<10)
	return outer.Bytes()
}

// Not parallel: the allocation figure must be this request's alone.
func TestCompressedBodyRefusedWithoutDecoding(t *testing.T) {
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	bomb := gzipBomb(t)

	send := func(encoding string, body []byte) response {
		req, err := http.NewRequest(http.MethodPost, b.url+"/v1/jobs", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "bomb")
		req.Header.Set("Content-Encoding", encoding)
		resp, err := b.http.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return response{status: resp.StatusCode, header: resp.Header, body: data}
	}

	// Warm up the connection and the handlers, then measure one request.
	r := send("gzip", []byte("not gzip"))
	require.Equal(t, http.StatusUnsupportedMediaType, r.status, "%s", r.body)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r = send("gzip, gzip", bomb)
	runtime.ReadMemStats(&after)

	require.Equal(t, http.StatusUnsupportedMediaType, r.status, "%s", r.body)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	require.Equal(t, "/problems/unsupported-media-type", r.json(t)["type"])
	require.Equal(t, "identity", r.header.Get("Accept-Encoding"), "RFC 9110 15.5.16: say which codings are accepted")
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(16<<20), "a few hundred bytes must not make the server allocate %d MiB", allocated>>20)

	// Every coding but identity, in any spelling, on any route.
	for _, enc := range []string{"GZIP", "deflate", "br", "identity, gzip", "x-gzip"} {
		r = send(enc, []byte(permit))
		require.Equal(t, http.StatusUnsupportedMediaType, r.status, "%s: %s", enc, r.body)
	}
	require.Equal(t, 0, b.countJobs(t), "nothing compressed is admitted")

	r = send("identity", []byte(permit))
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
}

func TestCompressedFormRefusedOnDevToken(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.Dev = true })
	// fasthttp gunzips a multipart form on its own when asked for a form
	// value; the refusal must come before any route reads one.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	require.NoError(t, mw.WriteField("tenant", "4"))
	require.NoError(t, mw.WriteField("subject", "reviewer-47"))
	require.NoError(t, mw.Close())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write(form.Bytes())
	require.NoError(t, err)
	require.NoError(t, zw.Close())

	req, err := http.NewRequest(http.MethodPost, b.url+"/dev/token", &gz)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s", body)
}

func TestBodyOverTransportLimitIsAProblem(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	body := `{"type":"permit_report","params":{"x":"` + strings.Repeat("a", 2<<20) + `"}}`
	// The server answers before it has read the body; without a lingering
	// close the client often sees a reset instead, so try it several times.
	for range 5 {
		r := b.submit(t, tok, "big", body)
		require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "%s", r.body)
		require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
		require.Equal(t, "/problems/payload-too-large", r.json(t)["type"])
	}
	require.Equal(t, 0, b.countJobs(t))
}

func TestOversizedHeadersAreRefused(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	r := b.do(t, http.MethodGet, "/v1/jobs", tok, "", "X-Padding: "+strings.Repeat("p", 16<<10))
	require.GreaterOrEqual(t, r.status, 400, "%s", r.body)
	require.Less(t, r.status, 500, "%s", r.body)
}
