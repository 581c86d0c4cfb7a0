package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseAllowReadsCIDRsAndBareAddresses(t *testing.T) {
	t.Parallel()
	got, err := ParseAllow("10.0.0.0/8, 192.168.1.7 ,fd00::/8")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("fd00::/8")}, got)
	none, err := ParseAllow("")
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = ParseAllow("10.0.0.0/8,intranet")
	require.ErrorContains(t, err, `"intranet"`)
}

func TestPolicyPermitsPublicAddressesAndItsRangesOnly(t *testing.T) {
	t.Parallel()
	p := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}
	require.True(t, p.Permits(netip.MustParseAddr("8.8.8.8")))
	require.True(t, p.Permits(netip.MustParseAddr("10.1.2.3")))
	require.True(t, p.Permits(netip.MustParseAddr("::ffff:10.1.2.3")), "an IPv4-mapped address is its IPv4 one")
	require.False(t, p.Permits(netip.MustParseAddr("10.2.0.1")))
	require.False(t, p.Permits(netip.MustParseAddr("127.0.0.1")))
	require.False(t, p.Permits(netip.MustParseAddr("169.254.169.254")), "cloud metadata")
	require.True(t, Policy{AllowAll: true}.Permits(netip.MustParseAddr("127.0.0.1")))
}

func TestCheckURLRefusesEarlyWhatTheDialerWould(t *testing.T) {
	t.Parallel()
	p := Policy{}
	for _, bad := range []string{"ftp://example.com/", "https://user:pw@example.com/", "http://localhost:8080/", "https://127.0.0.1/",
		"http://[::1]/", "https:///nohost", "http://10.0.0.1/x?token=secret"} {
		_, shown, err := p.CheckURL(bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "secret", "an error never quotes the path or query")
		require.NotContains(t, shown, "secret")
	}
	_, _, err := p.CheckURL("https://hooks.example.com/run?token=secret")
	require.NoError(t, err)
	_, _, err = Policy{Allow: Loopback}.CheckURL("http://localhost:8080/")
	require.NoError(t, err)
}

// The check runs on the address dialed, whatever the URL named: a name
// that resolves to loopback is refused as loopback is.
func TestTheDialerRefusesAnAddressThePolicyDoesNot(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, host := range []string{"127.0.0.1", "localhost"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/", nil)
		_, err := NewClient(Policy{}, 0, 1).Do(req)
		require.True(t, errors.Is(err, ErrForbiddenAddress), "%s: %v", host, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := NewClient(Policy{Allow: Loopback}, 0, 1).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 204, resp.StatusCode)
}

func TestNoRedirectIsFollowed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.RedirectHandler("http://169.254.169.254/latest/meta-data", http.StatusFound))
	defer srv.Close()
	resp, err := NewClient(Policy{Allow: Loopback}, 5*time.Second, 1).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
}

// An answer's header is bounded: a handler cannot make jobgate hold an
// endless one.
func TestAnAnswersHeaderIsBounded(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Junk", strings.Repeat("j", 2*MaxResponseHeaderBytes))
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	_, err := NewClient(Policy{Allow: Loopback}, 5*time.Second, 1).Get(srv.URL)
	require.ErrorContains(t, err, "header")
}

// A server that offers HTTP/2 is spoken to in HTTP/2, and its certificate
// is verified: one no trusted authority signed is refused.
func TestHTTP2WhenOfferedAndTLSVerified(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	_, err := NewClient(Policy{Allow: Loopback}, 5*time.Second, 1).Get(srv.URL)
	require.ErrorContains(t, err, "certificate", "a certificate no trusted authority signed")

	c := NewClient(Policy{Allow: Loopback}, 5*time.Second, 1)
	c.Transport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 2, resp.ProtoMajor)
}
