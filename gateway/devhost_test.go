package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The development sign-in answers only requests addressed to a loopback
// name: a page elsewhere that rebinds its own host name to 127.0.0.1 (DNS
// rebinding) reaches the listener, but its Host header names it, and it
// gets 403 forbidden instead of a token.
func TestDevTokenOnlyForLoopbackHosts(t *testing.T) {
	t.Parallel()
	g := memGateway(t, Config{Dev: true})
	form := url.Values{"tenant": {"4"}, "subject": {"reviewer-47"}}.Encode()
	post := func(host string) (int, string) {
		req := httptest.NewRequest(http.MethodPost, "/dev/token", strings.NewReader(form))
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := g.App().Test(req, -1)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	for _, host := range []string{"127.0.0.1", "127.0.0.1:8080", "localhost", "localhost:8080", "LocalHost:1", "[::1]", "[::1]:8080"} {
		status, body := post(host)
		require.Equal(t, http.StatusOK, status, "Host %q: %s", host, body)
		require.NotEmpty(t, jsonField(t, body, "token"), host)
	}
	for _, host := range []string{
		"evil.example.com", "evil.example.com:8080", "127.0.0.1.nip.io", "127.0.0.1.nip.io:8080", "localhost.evil.example.com",
		"10.0.0.7:8080", "127.0.0.2:8080", "0.0.0.0:8080", "[::ffff:127.0.0.1]:8080", "localhost:123456",
	} {
		status, body := post(host)
		require.Equal(t, http.StatusForbidden, status, "Host %q: %s", host, body)
		require.Equal(t, "/problems/forbidden", jsonField(t, body, "type"), host)
		require.Empty(t, jsonField(t, body, "token"), host)
	}
}

func TestLoopbackHost(t *testing.T) {
	t.Parallel()
	require.True(t, loopbackHost("[0:0:0:0:0:0:0:1]:8080"), "::1 written out is ::1")
	for _, host := range []string{"", "[::1", "[::1]x", "[::1]:", "127.0.0.1:80:80", "127.0.0.1:", "127.0.0.1:port", "localhost.", "::1"} {
		require.False(t, loopbackHost(host), "%q", host)
	}
}
