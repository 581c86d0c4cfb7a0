package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// Issue 34, as an attacker with one worker credential and one requester
// token: a worker declares a type whose array items require 4,200 names
// (with up to 500 items: with more it is refused now), and a requester
// posts the request that cost 2.1 million field errors, and the others of
// the issue, again and again. serve's peak RSS grows by less than 64 MiB
// (before, one 1.5 KB request took it from 352 to 794 MB), every answer is
// a 422 of at most 64 KiB, and another requester's job is admitted.
func TestServeMemoryUnderTheCostliestValidations(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	dir, addr, natsAddr := t.TempDir(), jobtest.FreeAddr(t), jobtest.FreeAddr(t)
	serve := startJobgate(t, "serve", "--data-dir", dir, "--http-addr", addr, "--nats-listen", natsAddr)
	waitReady(t, addr, serve.out)

	names := make([]string, 4200)
	for i := range names {
		names[i] = fmt.Sprintf(`"a%d"`, i)
	}
	schema := `{"type":"object","additionalProperties":false,"properties":{"a":{"type":"array","maxItems":500,"items":{"type":"object","maxProperties":1,"required":[` + strings.Join(names, ",") + `]}}}}`
	wc := natsUserJSON(t, dir, "--worker", "--type", "required_list")
	w, err := worker.New(worker.Config{URL: "nats://" + natsAddr, User: wc["user"], Password: wc["password"], Name: "attacker"})
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[map[string]any]{
		Name: "required_list", Schema: json.RawMessage(schema), ContentType: "text/plain", Timeout: time.Minute,
		Work: func(context.Context, *worker.Job[map[string]any]) error { return nil },
	}))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })

	tok := mintToken(t, dir, "4", "attacker")
	require.Eventually(t, func() bool {
		code, _ := postJob(t, addr, tok, "warm-up", `{"type":"required_list","params":{"a":[]}}`)
		return code == http.StatusAccepted
	}, 30*time.Second, 50*time.Millisecond, "the type was not accepted")
	before := peakRSS(t, serve.pid)

	objects := func(n int) string { return strings.TrimSuffix(strings.Repeat("{},", n), ",") }
	for i := range 10 {
		for _, n := range []int{500, 30, 20000} {
			code, body := postRaw(t, addr, tok, fmt.Sprintf("k-%d-%d", i, n), `{"type":"required_list","params":{"a":[`+objects(n)+`]}}`)
			require.Equal(t, http.StatusUnprocessableEntity, code, "%.300s", body)
			require.LessOrEqual(t, len(body), 64<<10)
		}
	}
	grew := peakRSS(t, serve.pid) - before
	t.Logf("peak RSS %d MiB before, grew by %d MiB", before>>20, grew>>20)
	require.Less(t, grew, int64(64<<20), "serve's peak RSS grew by %d MiB", grew>>20)

	code, _ := postJob(t, addr, mintToken(t, dir, "5", "bystander"), "mine", `{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":1}}`)
	require.Equal(t, http.StatusAccepted, code)
}

// natsUserJSON is `jobgate nats-user --json` on a data dir.
func natsUserJSON(t *testing.T, dir string, args ...string) map[string]string {
	t.Helper()
	var out strings.Builder
	m := &Main{Stdout: &out, Stderr: &strings.Builder{}, Getenv: func(string) string { return "" }}
	require.NoError(t, m.Run(context.Background(), append([]string{"nats-user", "--data-dir", dir, "--json"}, args...)))
	var c map[string]string
	require.NoError(t, json.Unmarshal([]byte(out.String()), &c))
	return c
}

// postRaw posts a job and returns the status and the body as it came.
func postRaw(t *testing.T, addr, token, key, body string) (int, []byte) {
	t.Helper()
	code, data, err := post(addr, token, key, body)
	require.NoError(t, err)
	return code, data
}
