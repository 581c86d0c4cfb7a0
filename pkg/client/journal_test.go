package client_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A journal held by another process: a clear error after the lock timeout,
// and nothing is sent (no key journaled, no request).
func TestJournalLockedIsAClearError(t *testing.T) {
	t.Parallel()
	cs, _, clk := fakeSetup(t, nil, client.RetryPolicy{})
	path := filepath.Join(t.TempDir(), "journal.db")
	holder, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	c, err := client.New(serverURL(t, cs), testToken(t), client.WithJournal(path), client.WithClock(clk),
		client.WithJournalLockTimeout(150*time.Millisecond))
	require.NoError(t, err)
	_, err = c.Submit(context.Background(), "permit_report", permit)
	require.ErrorIs(t, err, client.ErrJournalLocked)
	require.Contains(t, err.Error(), path)
	require.Empty(t, cs.at, "nothing may be sent before the key is journaled")

	require.NoError(t, holder.Close())
	_, err = c.Submit(context.Background(), "permit_report", permit)
	require.NoError(t, err)
	require.Len(t, cs.at, 1)
}

// serverURL finds the URL of the httptest server behind a contractServer
// (fakeSetup's client knows it).
func serverURL(t *testing.T, cs *contractServer) string {
	t.Helper()
	require.NotNil(t, cs.url)
	return cs.url
}

// Finished entries are pruned once the key's retention has passed;
// unanswered ones stay, because they are work the user asked for.
func TestJournalPrune(t *testing.T) {
	t.Parallel()
	var unanswered atomic.Bool
	cs, c, clk := fakeSetup(t, func(n int, w http.ResponseWriter) bool {
		if unanswered.Load() {
			problem(w, http.StatusServiceUnavailable, "unavailable", "1")
			return true
		}
		return false
	}, client.RetryPolicy{MaxAttempts: 1})
	_ = cs
	ctx := context.Background()
	done, err := c.Submit(ctx, "permit_report", permit)
	require.NoError(t, err)
	require.NoError(t, c.Journal().Settle(done.Key))
	open, err := c.Submit(ctx, "permit_report", map[string]any{"case_id": 48, "revision": 1})
	require.NoError(t, err)
	unanswered.Store(true)
	_, err = c.Submit(ctx, "permit_report", map[string]any{"case_id": 49, "revision": 1})
	require.ErrorIs(t, err, client.ErrNotConfirmed)

	clk.Advance(719 * time.Hour)
	require.NoError(t, c.Journal().Prune())
	entries, err := c.Journal().Entries("")
	require.NoError(t, err)
	require.Len(t, entries, 3, "nothing is pruned within the retention")

	// Submissions sweep the journal (at most hourly) on their way.
	clk.Advance(2 * time.Hour)
	unanswered.Store(false)
	next, err := c.Submit(ctx, "permit_report", map[string]any{"case_id": 50, "revision": 1})
	require.NoError(t, err)
	entries, err = c.Journal().Entries("")
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, client.EntryPending, entries[0].State, "the unanswered one stays")
	require.NotEqual(t, done.Key, entries[0].Key)
	require.NotEqual(t, open.Key, entries[0].Key)
	require.Equal(t, next.Key, entries[1].Key)
}

// Two processes submitting through one journal at the same time: both
// finish, every entry is there, and the file passes bbolt's consistency
// check.
func TestJournalTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	t.Parallel()
	cs, _, _ := fakeSetup(t, nil, client.RetryPolicy{})
	path := filepath.Join(t.TempDir(), "journal.db")
	tok := testToken(t)
	const n = 15
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperJournalProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "JOBGATE_HELPER_JOURNAL="+path, "JOBGATE_HELPER_URL="+cs.url,
		"JOBGATE_HELPER_TOKEN="+tok, "JOBGATE_HELPER_N="+strconv.Itoa(n), "JOBGATE_HELPER_BASE=1000")
	out := make(chan error, 1)
	var output []byte
	go func() {
		var err error
		output, err = cmd.CombinedOutput()
		out <- err
	}()
	submitMany(t, cs.url, tok, path, 0, n)
	require.NoError(t, <-out, string(output))

	entries, err := (&clientJournal{path}).entries(t)
	require.NoError(t, err)
	require.Len(t, entries, 2*n)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}))
}

type clientJournal struct{ path string }

func (j *clientJournal) entries(t *testing.T) ([]client.Entry, error) {
	c, err := client.New("http://127.0.0.1:1", testToken(t), client.WithJournal(j.path))
	require.NoError(t, err)
	return c.Journal().Entries("")
}

func submitMany(t *testing.T, url, tok, path string, base, n int) {
	t.Helper()
	c, err := client.New(url, tok, client.WithJournal(path), client.WithJournalLockTimeout(20*time.Second))
	require.NoError(t, err)
	for i := range n {
		_, err := c.Submit(context.Background(), "permit_report", map[string]any{"case_id": base + i + 1, "revision": 1})
		require.NoError(t, err)
	}
}

// TestHelperJournalProcess is the second process of TestJournalTwoProcesses.
func TestHelperJournalProcess(t *testing.T) {
	path := os.Getenv("JOBGATE_HELPER_JOURNAL")
	if path == "" {
		t.Skip("helper process only")
	}
	n, _ := strconv.Atoi(os.Getenv("JOBGATE_HELPER_N"))
	base, _ := strconv.Atoi(os.Getenv("JOBGATE_HELPER_BASE"))
	submitMany(t, os.Getenv("JOBGATE_HELPER_URL"), os.Getenv("JOBGATE_HELPER_TOKEN"), path, base, n)
	fmt.Println("helper done")
}

// Keys are only resumed by the identity that made them.
func TestJournalScopedToIdentity(t *testing.T) {
	t.Parallel()
	cs, c, _ := fakeSetup(t, func(n int, w http.ResponseWriter) bool {
		problem(w, http.StatusServiceUnavailable, "unavailable", "1")
		return true
	}, client.RetryPolicy{MaxAttempts: 1})
	_, err := c.Submit(context.Background(), "permit_report", permit)
	require.ErrorIs(t, err, client.ErrNotConfirmed)
	other, err := client.New(cs.url, mintFor(t, "4", "someone-else"), client.WithJournal(c.Journal().Path()))
	require.NoError(t, err)
	pending, err := other.Pending(context.Background())
	require.NoError(t, err)
	require.Empty(t, pending)
	mine, err := c.Pending(context.Background())
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, "permit_report", mine[0].Type)
	require.True(t, job.ValidKey(mine[0].Key))
}
