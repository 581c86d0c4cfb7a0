package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every operation answers some 4xx: the HTTP layer refuses oversized headers
// (400) and bodies over the transport limit (413) before any handler runs,
// and the document says so (the validating transport rejects an
// undocumented status).
func TestRefusalsBeforeAnyOperationAreDocumented(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/"} {
		r := b.do(t, http.MethodGet, path, "", "", "X-Padding: "+strings.Repeat("y", 64<<10))
		require.Equal(t, http.StatusBadRequest, r.status, path)
		require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), path)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml"} {
		req, err := http.NewRequest(http.MethodGet, b.url+path, strings.NewReader(strings.Repeat("x", 2*transportBodyLimit)))
		require.NoError(t, err)
		resp, err := b.http.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, path)
	}
}

// The document is served as checked in, with a relative server URL: the
// gateway listens wherever it is told.
func TestOpenAPIServerIsRelative(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	r := b.do(t, http.MethodGet, "/openapi.yaml", "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, OpenAPI(), r.body)
	require.Contains(t, string(r.body), "servers:\n  - url: /\n")
	require.NotContains(t, string(r.body), "127.0.0.1")
}
