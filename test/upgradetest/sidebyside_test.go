package upgradetest

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats-server/v2/server"
)

// A rolling upgrade of a deployment of components on one NATS server: the
// previous release's gateway, dispatcher, renderer and notifier run jobs;
// this tree's dispatcher and renderer start beside them, the old ones are
// stopped (a long job running on the old renderer is given back and
// finished by the new one), jobs are admitted through the old gateway to
// the new dispatcher, then the gateway and the notifier are replaced.
// Every key replays to its job, every job succeeds, one job per key.
func TestRollingUpgradeSideBySide(t *testing.T) {
	oldBin, newBin := binaries(t)
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	env := []string{"JOBGATE_NATS_URL=" + ns.ClientURL(), "JOBGATE_AUTH_SECRET=upgrade-test-secret",
		"JOBGATE_STORE_MAX_BYTES=134217728", "JOBGATE_RESULTS_MAX_BYTES=134217728"}
	component := func(name, bin string, extra ...string) *proc {
		dir := filepath.Join(t.TempDir(), name)
		return start(t, name, bin, append(append([]string{}, env...), extra...), name[4:], "--data-dir", dir)
	}
	oldDisp := component("old dispatcher", oldBin)
	oldNotif := component("old notifier", oldBin)
	oldRend := component("old renderer", oldBin)
	addr := jobtest.FreeAddr(t)
	oldGw := component("old gateway", oldBin, "JOBGATE_HTTP_ADDR="+addr)
	waitReady(t, oldGw, addr)
	tok := token(t, oldBin, env)
	// The renderer declares permit_report once it is connected: until
	// then the type is unknown (422).
	deadline := time.Now().Add(60 * time.Second)
	for {
		var v map[string]any
		if code, err := getJSON(addr, tok, "/v1/types/permit_report", &v); err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("permit_report not declared within 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	keys := map[string]string{}
	admit := func(gw string, from, to int) {
		for i := from; i < to; i++ {
			key := fmt.Sprintf("k-%d", i)
			code, id := submit(t, gw, tok, key, i)
			if code != http.StatusAccepted {
				t.Fatalf("%s: %d", key, code)
			}
			keys[key] = id
		}
	}
	admit(addr, 0, 8)
	waitState(t, addr, tok, keys["k-0"], "running", 60*time.Second)

	ops := jobtest.FreeAddr(t)
	newDisp := component("new dispatcher", newBin, "JOBGATE_OPS_ADDR="+ops)
	waitReady(t, newDisp, ops)
	rops := jobtest.FreeAddr(t)
	newRend := component("new renderer", newBin, "JOBGATE_OPS_ADDR="+rops)
	waitReady(t, newRend, rops)
	oldRend.stop(t)
	oldDisp.stop(t)
	admit(addr, 8, 12) // the old gateway, the new dispatcher and renderer

	addr2 := jobtest.FreeAddr(t)
	newGw := component("new gateway", newBin, "JOBGATE_HTTP_ADDR="+addr2)
	waitReady(t, newGw, addr2)
	oldGw.stop(t)
	nops := jobtest.FreeAddr(t)
	newNotif := component("new notifier", newBin, "JOBGATE_OPS_ADDR="+nops)
	waitReady(t, newNotif, nops)
	oldNotif.stop(t)
	admit(addr2, 12, 16)

	for i := range 16 {
		key := fmt.Sprintf("k-%d", i)
		code, id := submit(t, addr2, tok, key, i)
		if code != http.StatusOK || id != keys[key] {
			t.Fatalf("%s replayed as %d %s, want 200 %s", key, code, id, keys[key])
		}
	}
	for _, id := range keys {
		waitState(t, addr2, tok, id, "succeeded", 3*time.Minute)
	}
	requireOnePerKey(t, listIDs(t, addr2, tok), keys)
	for _, p := range []*proc{newGw, newNotif, newRend, newDisp} {
		p.stop(t)
	}
}
