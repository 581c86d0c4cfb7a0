package main

import (
	"os"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/examples/csv-export/sales"
	"github.com/stretchr/testify/require"
)

// The README's steps work as written: a worker credential names the types
// it may run (`jobgate nats-user --worker` alone is refused), so every
// command that makes one names this example's type (issue 34).
func TestReadmeWorkerCredentialNamesTheType(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	found := 0
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.Contains(line, "nats-user") || !strings.Contains(line, "--worker") || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		found++
		require.Contains(t, line, "--type "+sales.TypeName, "the command names the type: %s", line)
	}
	require.NotZero(t, found, "the README shows how to make the worker's credential")
}
