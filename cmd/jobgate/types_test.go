package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// `jobgate types apply -f` declares the file's endpoint types and says
// what it did, once: the same file again changes nothing; a changed type
// says so; rotate-secret prints a new secret.
func TestCLITypesApply(t *testing.T) {
	t.Parallel()
	b := setupServe(t, "--dev") // --dev: endpoints on loopback
	var out, errOut bytes.Buffer
	tm := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	require.NoError(t, tm.Run(context.Background(), []string{"token", "--data-dir", b.dir, "--operator", "--subject", "ops"}), errOut.String())
	b.env["JOBGATE_TOKEN"] = strings.TrimSpace(out.String())

	file := filepath.Join(b.dir, "types.yaml")
	write := func(concurrency string) {
		require.NoError(t, os.WriteFile(file, []byte(`
types:
  - name: thumbnail
    description: A PNG thumbnail
    schema:
      type: object
      additionalProperties: false
      properties:
        url: {type: string, maxLength: 2048}
    timeout_seconds: 60
    content_type: image/png
    endpoint: {url: "http://127.0.0.1:9/thumbnail", concurrency: `+concurrency+`}
---
name: ping
schema: {type: object, additionalProperties: false}
endpoint: {url: "http://127.0.0.1:9/ping"}
`), 0o600))
	}
	ctx := context.Background()
	write("4")
	stdout, stderr, err := b.run(t, ctx, "types", "apply", "-f", file)
	require.NoError(t, err, stderr)
	lines := outLines(stdout)
	require.Len(t, lines, 2, stdout)
	secret := regexp.MustCompile(`^thumbnail: created \(secret (whsec_[A-Za-z0-9+/=]+): store it`)
	require.Regexp(t, secret, lines[0])
	require.Regexp(t, `^ping: created \(secret whsec_`, lines[1])

	stdout, stderr, err = b.run(t, ctx, "types", "apply", "-f", file)
	require.NoError(t, err, stderr)
	require.Equal(t, []string{"thumbnail: unchanged", "ping: unchanged"}, outLines(stdout))

	write("8")
	stdout, stderr, err = b.run(t, ctx, "types", "apply", "-f", file)
	require.NoError(t, err, stderr)
	require.Equal(t, []string{"thumbnail: changed", "ping: unchanged"}, outLines(stdout))

	stdout, stderr, err = b.run(t, ctx, "types", "rotate-secret", "thumbnail")
	require.NoError(t, err, stderr)
	require.Regexp(t, `^whsec_\S+$`, strings.TrimSpace(stdout))

	// A worker's name and a bad declaration: the server's problems, with
	// their exit codes.
	require.NoError(t, os.WriteFile(file, []byte("name: permit_report\nschema: {type: object, additionalProperties: false}\nendpoint: {url: \"http://127.0.0.1:9/\"}\n"), 0o600))
	_, stderr, err = b.run(t, ctx, "types", "apply", "-f", file)
	require.Error(t, err)
	require.Equal(t, exitConflict, ExitCode(err), stderr)
	require.NoError(t, os.WriteFile(file, []byte("name: broken\nschema: {type: object}\nendpoint: {url: \"http://127.0.0.1:9/\", concurrency: 0.5}\n"), 0o600))
	_, _, err = b.run(t, ctx, "types", "apply", "-f", file)
	require.Error(t, err)
	require.Equal(t, exitInvalid, ExitCode(err))
	require.NoError(t, os.WriteFile(file, []byte("name: Not A Name\n"), 0o600))
	_, _, err = b.run(t, ctx, "types", "apply", "-f", file)
	require.Equal(t, exitInvalid, ExitCode(err))
}
