package index

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// crash ends an index as a killed process would: no sync, no mark removed.
func crash(t *testing.T, x *Index) {
	t.Helper()
	x.stop()
	<-x.done
	require.NoError(t, x.db.Close())
}

// plant puts in the file a job the change log never held: what a page lost
// or torn in a power loss could read as.
func plant(t *testing.T, x *Index, tenant string) string {
	t.Helper()
	const id = "job_zzzzzzzzzzzzzzzzzzzzzzzzzz"
	require.NoError(t, x.db.Update(func(tx *bolt.Tx) error {
		tn := newTxn(tx, time.Now())
		tn.change(nil, &Entry{ID: id, Tenant: tenant, Requester: "ghost", Type: "permit_report", State: job.StateQueued,
			Class: string(job.StateQueued), Created: time.Now().UnixNano(), Rev: 1})
		tn.flush()
		return nil
	}))
	return id
}

// The index file is written without an fsync per transaction: a process
// that crashed left its writes in the page cache, and the file resumes as
// it was; a file left unsynced under another boot of the machine (a power
// loss) is rebuilt from the change log; a clean close syncs the file and
// leaves no mark.
func TestAnUnsyncedIndexIsRebuiltAfterTheMachineRestarted(t *testing.T) {
	boot := "boot-1"
	bootID = func() string { return boot }
	t.Cleanup(func() { bootID = readBootID })
	env := jobtest.Start(t)
	res := env.Connect(t, "index").Res
	path := filepath.Join(t.TempDir(), "index.db")
	a := env.Commit(t, res, jobtest.Request{Key: "a"})

	x, err := Open(path, StoreSource(res.Jobs), Options{})
	require.NoError(t, err)
	require.True(t, x.db.NoSync, "no fsync per transaction where the boot is named")
	caughtUp(t, x)
	ghost := plant(t, x, a.Tenant)
	crash(t, x)

	// The process crashed, the machine did not: the file is whole.
	y, err := Open(path, StoreSource(res.Jobs), Options{})
	require.NoError(t, err)
	caughtUp(t, y)
	p, err := y.Page(Query{Limit: 10})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{a.ID, ghost}, ids(p), "kept after a process crash")
	crash(t, y)

	// The machine restarted under the unsynced file.
	boot = "boot-2"
	z, err := Open(path, StoreSource(res.Jobs), Options{})
	require.NoError(t, err)
	caughtUp(t, z)
	p, err = z.Page(Query{Limit: 10})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{a.ID}, ids(p), "rebuilt from the change log")
	require.NoError(t, z.Close())
	_, err = os.Stat(markPath(path))
	require.ErrorIs(t, err, os.ErrNotExist, "a clean close leaves no mark")

	// Closed cleanly, the file survives a restart of the machine.
	boot = "boot-3"
	w := openIndex(t, path, res)
	require.Equal(t, z.Applied(), w.Applied(), "resumes where it stopped")
}

// Without a boot id every transaction is synced and no mark is written.
func TestAnIndexWithoutBootIDSyncs(t *testing.T) {
	bootID = func() string { return "" }
	t.Cleanup(func() { bootID = readBootID })
	env := jobtest.Start(t)
	res := env.Connect(t, "index").Res
	path := filepath.Join(t.TempDir(), "index.db")
	x := openIndex(t, path, res)
	require.False(t, x.db.NoSync)
	_, err := os.Stat(markPath(path))
	require.ErrorIs(t, err, os.ErrNotExist)
}
