package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/stretchr/testify/require"
)

// `jobgate token` writes the configured audience and issuer into its
// tokens, so a gateway that requires them takes what it mints.
func TestTokenCarriesConfiguredAudienceAndIssuer(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"JOBGATE_DATA_DIR": t.TempDir(), "JOBGATE_AUTH_SECRET": "token-test-secret",
		"JOBGATE_AUTH_AUDIENCE": "jobgate-api", "JOBGATE_AUTH_ISSUER": "https://login.example.com",
	}
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }}
	require.NoError(t, m.Run(context.Background(), []string{"token", "--tenant", "4", "--subject", "reviewer-47"}), errOut.String())
	tok := strings.TrimSpace(out.String())
	secret := []byte(env["JOBGATE_AUTH_SECRET"])
	id, err := auth.NewVerifier(secret, nil, auth.WithAudience("jobgate-api"), auth.WithIssuer("https://login.example.com")).Verify(tok)
	require.NoError(t, err)
	require.Equal(t, "reviewer-47", id.Requester)
	_, err = auth.NewVerifier(secret, nil, auth.WithAudience("another-api")).Verify(tok)
	require.Error(t, err, "the audience is the configured one")
}
