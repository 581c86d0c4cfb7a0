package gateway

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/stretchr/testify/require"
)

// form posts a form the way the page's development sign-in does.
func (b *testBundle) form(t *testing.T, path string, values url.Values) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(values.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

func TestPageServedWithoutExternalResources(t *testing.T) {
	t.Parallel()
	_, b := setup(t)

	r := b.do(t, http.MethodGet, "/", "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"))
	csp := r.header.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'none'")
	require.Contains(t, csp, "script-src 'self'")
	require.Contains(t, csp, "connect-src 'self'")
	require.Equal(t, "no-referrer", r.header.Get("Referrer-Policy"), "a signed link must not leak in a Referer")
	require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	html := string(r.body)
	require.Contains(t, html, `data-dev="false"`, "no development sign-in without --dev")
	require.Contains(t, html, `src="/ui/app.js"`)
	require.NotContains(t, html, "http://", "the page loads nothing from elsewhere")
	require.NotContains(t, html, "https://")

	etag := r.header.Get("ETag")
	require.NotEmpty(t, etag)
	r = b.do(t, http.MethodGet, "/", "", "", "If-None-Match: "+etag)
	require.Equal(t, http.StatusNotModified, r.status)

	for path, ctype := range map[string]string{"/ui/app.js": "text/javascript", "/ui/style.css": "text/css"} {
		r = b.do(t, http.MethodGet, path, "", "")
		require.Equal(t, http.StatusOK, r.status, path)
		require.True(t, strings.HasPrefix(r.header.Get("Content-Type"), ctype), path)
		require.Equal(t, "no-cache", r.header.Get("Cache-Control"), path)
		require.NotContains(t, string(r.body), "https://", "%s loads nothing from elsewhere", path)
	}
	r = b.do(t, http.MethodGet, "/ui/index.html", "", "")
	require.Equal(t, http.StatusNotFound, r.status)
	r = b.do(t, http.MethodGet, "/ui/../openapi.yaml", "", "")
	require.NotEqual(t, http.StatusOK, r.status)
}

func TestDevTokenOnlyInDevMode(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	r := b.form(t, "/dev/token", url.Values{"tenant": {"4"}, "subject": {"reviewer-47"}})
	require.Equal(t, http.StatusNotFound, r.status, "a gateway without --dev mints nothing")
}

func TestDevTokenMintsShortLivedToken(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.Dev = true })

	r := b.do(t, http.MethodGet, "/", "", "")
	require.Contains(t, string(r.body), `data-dev="true"`)

	r = b.form(t, "/dev/token", url.Values{"tenant": {"4"}, "subject": {"reviewer-47"}})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "no-store", r.header.Get("Cache-Control"))
	body := r.json(t)
	tok, _ := body["token"].(string)
	require.NotEmpty(t, tok)
	require.Equal(t, "Bearer", body["token_type"])
	id, err := auth.NewVerifier(b.secret, nil).Verify(tok)
	require.NoError(t, err)
	require.Equal(t, "4", id.Tenant)
	require.Equal(t, "reviewer-47", id.Requester)
	require.False(t, id.Admin)
	require.WithinDuration(t, time.Now().Add(devTokenTTL), id.Expires, time.Minute)

	// The token works against the API like one from `jobgate token`.
	list := b.do(t, http.MethodGet, "/v1/jobs", tok, "")
	require.Equal(t, http.StatusOK, list.status)

	r = b.form(t, "/dev/token", url.Values{"tenant": {"4"}, "subject": {"not valid!"}})
	require.Equal(t, http.StatusUnprocessableEntity, r.status)
	require.Equal(t, "/problems/validation", r.json(t)["type"])

	r = b.do(t, http.MethodPost, "/dev/token", "", `{"tenant":"4","subject":"x"}`)
	require.Equal(t, http.StatusUnsupportedMediaType, r.status)
}

// The development sign-in mints a token for anyone who can reach it; on an
// address other machines reach, the gateway does not start at all.
func TestDevModeRefusedOnNonLoopbackAddress(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.0.2.7:8080", "[::]:8080", "example.com:8080"} {
		_, err := New(Config{Addr: addr, AuthSecret: []byte("s"), Dev: true}, Stores{}, nil)
		require.Error(t, err, addr)
		require.ErrorContains(t, err, addr)
		require.NoError(t, CheckDev(addr, false), "without dev mode any address is fine")
	}
	for _, addr := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080"} {
		require.NoError(t, CheckDev(addr, true), addr)
	}
}
