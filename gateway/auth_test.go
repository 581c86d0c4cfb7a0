package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// memGateway is a gateway on in-memory stores with the given config
// (AuthSecret filled in), for tests of what happens before any store is
// asked.
func memGateway(t *testing.T, cfg Config) *Gateway {
	t.Helper()
	return memGatewayOn(t, cfg, &memRecords{m: map[string]*job.Record{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// memGatewayOn is memGateway on the given record store, logging to log.
func memGatewayOn(t *testing.T, cfg Config, jobs records, log *slog.Logger) *Gateway {
	t.Helper()
	if cfg.AuthSecret == nil {
		cfg.AuthSecret = []byte("0123456789abcdef0123456789abcdef")
	}
	g, err := newGateway(cfg, memStores(jobs, &failingWork{}), log)
	require.NoError(t, err)
	require.NoError(t, g.Init(context.Background()))
	t.Cleanup(func() { _ = g.Stop(context.Background()) })
	return g
}

// jsonField is one string member of a JSON object.
func jsonField(t *testing.T, body, name string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m), body)
	s, _ := m[name].(string)
	return s
}

// call sends one in-memory request; headers are "Name: value" strings.
func call(t *testing.T, g *Gateway, method, target, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Add(k, v)
	}
	resp, err := g.App().Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(data)
}

// A gateway with an audience and an issuer configured takes only tokens
// that carry both; its development sign-in mints such tokens.
func TestGatewayRequiresConfiguredAudienceAndIssuer(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	g := memGateway(t, Config{AuthSecret: secret, AuthAudience: "jobgate-api", AuthIssuer: "https://login.example.com", Dev: true})
	mint := func(opts ...auth.Option) string {
		tok, err := auth.Mint(secret, auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour, time.Now(), opts...)
		require.NoError(t, err)
		return tok
	}
	for name, tc := range map[string]struct {
		tok  string
		want int
	}{
		"both":         {mint(auth.WithAudience("jobgate-api"), auth.WithIssuer("https://login.example.com")), http.StatusOK},
		"neither":      {mint(), http.StatusUnauthorized},
		"no issuer":    {mint(auth.WithAudience("jobgate-api")), http.StatusUnauthorized},
		"other issuer": {mint(auth.WithAudience("jobgate-api"), auth.WithIssuer("https://other.example.com")), http.StatusUnauthorized},
		"other aud":    {mint(auth.WithAudience("billing-api"), auth.WithIssuer("https://login.example.com")), http.StatusUnauthorized},
	} {
		resp, body := call(t, g, http.MethodGet, "/v1/jobs", "", "Authorization: Bearer "+tc.tok)
		require.Equal(t, tc.want, resp.StatusCode, "%s: %s", name, body)
	}

	resp, body := call(t, g, http.MethodPost, "/dev/token", url.Values{"tenant": {"4"}, "subject": {"reviewer-47"}}.Encode(),
		"Content-Type: application/x-www-form-urlencoded", "Host: 127.0.0.1:8080")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	tok := jsonField(t, body, "token")
	_, err := auth.NewVerifier(secret, nil, auth.WithAudience("jobgate-api"), auth.WithIssuer("https://login.example.com")).Verify(tok)
	require.NoError(t, err, "the development sign-in's token carries the deployment's aud and iss")
	resp, body = call(t, g, http.MethodGet, "/v1/jobs", "", "Authorization: Bearer "+tok)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}
