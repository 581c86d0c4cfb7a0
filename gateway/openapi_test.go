package gateway

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"
)

// Every operation answers some 4xx: the HTTP layer refuses a request it
// cannot parse (400) or whose body exceeds the transport limit (413) before
// any handler runs, and the document says so (the validating transport
// rejects an undocumented status).
func TestRefusalsBeforeAnyOperationAreDocumented(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	for _, tc := range []struct {
		paths  []string
		header string
		status int
	}{
		{[]string{"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/"}, "Content-Length: many", http.StatusBadRequest},
		// Only the declared length: the body never comes, so the server's
		// close cannot race a client still writing and reset the answer.
		{[]string{"/healthz", "/readyz", "/metrics", "/openapi.yaml"}, "Content-Length: 2097152", http.StatusRequestEntityTooLarge},
	} {
		for _, path := range tc.paths {
			resp := b.raw(t, path, tc.header)
			require.Equal(t, tc.status, resp.StatusCode, "%s with %s", path, tc.header)
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		}
	}
}

// raw sends a GET that Go's client would not write (a header it owns),
// over a plain connection, and checks the answer against the document.
func (b *testBundle) raw(t *testing.T, path, header string) *http.Response {
	t.Helper()
	vt := *b.http.Transport.(*validatingTransport)
	vt.next = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		conn, err := net.DialTimeout("tcp", r.URL.Host, 5*time.Second)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: " + r.URL.Host + "\r\n" + header + "\r\n\r\n")); err != nil {
			return nil, err
		}
		return http.ReadResponse(bufio.NewReader(conn), r)
	})
	req, err := http.NewRequest(http.MethodGet, b.url+path, nil)
	require.NoError(t, err)
	resp, err := vt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

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

// The document states the licence the repository is under (LICENSE, the
// Apache License 2.0), by its SPDX identifier.
func TestOpenAPILicenceIsTheRepositorys(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	require.NoError(t, err)
	require.NotNil(t, doc.Info.License)
	require.Equal(t, "Apache-2.0", doc.Info.License.Name)
	require.Equal(t, "Apache-2.0", doc.Info.License.Identifier, "the SPDX identifier (OpenAPI 3.1 info.license.identifier)")
	text, err := os.ReadFile("../LICENSE")
	require.NoError(t, err)
	require.Contains(t, string(text), "Apache License\n                           Version 2.0, January 2004")
	require.Contains(t, string(text), "END OF TERMS AND CONDITIONS")
}
