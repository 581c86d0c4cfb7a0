package upgradetest

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jobgate/jobgate/test/jobtest"
)

// The previous release's serve admits jobs and runs two long ones; it is
// stopped (SIGTERM) and this tree's serve starts on the same data dir.
// Every key replays to its job with a token the old one minted, every job
// succeeds (the two that were running too), and the requester has exactly
// one job per key: none lost, none doubled.
func TestUpgradeOnOneDataDir(t *testing.T) {
	oldBin, newBin := binaries(t)
	dir := t.TempDir()
	env := []string{"JOBGATE_STORE_MAX_BYTES=268435456", "JOBGATE_RESULTS_MAX_BYTES=268435456"}
	addr := jobtest.FreeAddr(t)
	old := start(t, "old serve", oldBin, env, "serve", "--data-dir", dir, "--http-addr", addr)
	waitReady(t, old, addr)
	tok := token(t, oldBin, env, "--data-dir", dir)

	keys := map[string]string{} // key → job id
	for i := range 12 {
		key := fmt.Sprintf("k-%d", i)
		code, id := submit(t, addr, tok, key, i)
		if code != http.StatusAccepted {
			t.Fatalf("%s: %d", key, code)
		}
		keys[key] = id
	}
	waitState(t, addr, tok, keys["k-0"], "running", 60*time.Second)
	old.stop(t)

	addr2 := jobtest.FreeAddr(t)
	nw := start(t, "new serve", newBin, env, "serve", "--data-dir", dir, "--http-addr", addr2)
	waitReady(t, nw, addr2)
	for i := range 12 {
		key := fmt.Sprintf("k-%d", i)
		code, id := submit(t, addr2, tok, key, i)
		if code != http.StatusOK || id != keys[key] {
			t.Fatalf("%s replayed as %d %s, want 200 %s", key, code, id, keys[key])
		}
	}
	code, id := submit(t, addr2, tok, "after", 5)
	if code != http.StatusAccepted {
		t.Fatalf("a new key under the new binary: %d", code)
	}
	keys["after"] = id
	for _, id := range keys {
		waitState(t, addr2, tok, id, "succeeded", 3*time.Minute)
	}
	requireOnePerKey(t, listIDs(t, addr2, tok), keys)
	nw.stop(t)
}

// requireOnePerKey: the requester's jobs are exactly the keys' jobs.
func requireOnePerKey(t *testing.T, listed []string, keys map[string]string) {
	t.Helper()
	var want []string
	for _, id := range keys {
		want = append(want, id)
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("the requester's jobs %v, want one per key %v", listed, want)
	}
}
