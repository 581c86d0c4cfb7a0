package natsserver_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/stretchr/testify/require"
)

func free(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	return int64(st.Bavail) * int64(st.Bsize)
}

// An embedded server whose byte budgets the disk cannot hold refuses to
// start, naming the budgets' settings, instead of starting with a
// reservation the disk cannot back (it would fail writes when the disk,
// not a budget, runs out). What the store already holds counts as room:
// a restart on a disk its own data fills still starts.
func TestAReservationTheDiskCannotHoldIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const margin = 512 << 30 // far beyond what other processes change of the free space meanwhile
	_, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: dir, MaxStore: free(t, dir) + margin})
	require.ErrorContains(t, err, "JOBGATE_STORE_MAX_BYTES")
	require.ErrorContains(t, err, "JOBGATE_RESULTS_MAX_BYTES")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "refused before the server wrote anything")

	// The same reservation over a store that holds 1 TiB already (a sparse
	// file: counted at its size, taking no space).
	f, err := os.Create(filepath.Join(dir, "held"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(2*margin))
	require.NoError(t, f.Close())
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: dir, MaxStore: free(t, dir) + margin})
	require.NoError(t, err)
	emb.Shutdown()
}
