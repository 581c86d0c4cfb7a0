package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// SIGTERM drains: the process stops taking requests and work, lets a
// running render finish or hands it back (bounded by the renderer's drain
// timeout), and exits 0; the job ends succeeded either way.
func TestSIGTERMDrainsAndExitsZero(t *testing.T) {
	dir := t.TempDir()
	addr := jobtest.FreeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServeProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "JOBGATE_SERVE_HELPER_ARGS=serve --data-dir "+dir+" --http-addr "+addr)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, out.String())

	tok := mintToken(t, dir, "4", "reviewer-47")
	status, j := postJob(t, addr, tok, "big", `{"type":"permit_report","params":{"case_id":1,"revision":1,"pages":300}}`)
	require.Equal(t, http.StatusAccepted, status)
	id := j["id"].(string)
	get := func() map[string]any {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/jobs/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return m
	}
	require.Eventually(t, func() bool { return get()["state"] == "running" }, 30*time.Second, 5*time.Millisecond)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "exit code 0 after SIGTERM\n%s", out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM\n%s", out.String())
	}

	// The next process on the same data dir finishes the job.
	runServe(t, dir, addr)
	require.Eventually(t, func() bool { return get()["state"] == "succeeded" }, 90*time.Second, 50*time.Millisecond)
	require.False(t, strings.Contains(out.String(), "panic"), out.String())
}

// TestHelperServeProcess runs `jobgate` as a separate process for the
// signal test; it does nothing in a normal test run.
func TestHelperServeProcess(t *testing.T) {
	args := os.Getenv("JOBGATE_SERVE_HELPER_ARGS")
	if args == "" {
		t.Skip("helper process only")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	err := m.Run(ctx, strings.Fields(args))
	if err != nil && !errors.Is(err, context.Canceled) {
		os.Stderr.WriteString("jobgate: " + err.Error() + "\n")
		os.Exit(ExitCode(err))
	}
	os.Exit(0)
}

// On SIGTERM the components stop in the README's order, each after the
// one before it finished: the gateway (no new work is admitted), the
// renderer, the dispatcher, the notifier; the process exits 0. The
// dispatcher still runs after the gateway stopped, so a job admitted just
// before the signal is announced by its relay (the admission's event,
// which nothing else publishes).
func TestSIGTERMStopsTheGatewayBeforeTheDispatcher(t *testing.T) {
	dir := t.TempDir()
	addr := jobtest.FreeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServeProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "JOBGATE_SERVE_HELPER_ARGS=serve --data-dir "+dir+" --http-addr "+addr)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, out.String())
	tok := mintToken(t, dir, "4", "reviewer-47")
	status, j := postJob(t, addr, tok, "just-before-sigterm", `{"type":"permit_report","params":{"case_id":7,"revision":1,"pages":1}}`)
	require.Equal(t, http.StatusAccepted, status)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "exit code 0 after SIGTERM\n%s", out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM\n%s", out.String())
	}

	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: filepath.Join(dir, "nats")})
	require.NoError(t, err)
	defer emb.Shutdown()
	nc, err := emb.Connect("check")
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := natsjs.Bind(ctx, js)
	require.NoError(t, err)
	events := jobtest.Events(t, res, &job.Record{ID: j["id"].(string), Tenant: "4", Requester: "reviewer-47"})
	require.NotEmpty(t, events, "the dispatcher stopped before the gateway drained: the admission was never announced\n%s", out.String())
	require.Equal(t, "queued", string(events[0].Resource.State))

	logs := out.String()
	at := func(component string) int {
		i := strings.Index(logs, "component stopped\" component="+component)
		require.GreaterOrEqual(t, i, 0, "no stop of %s logged\n%s", component, logs)
		return i
	}
	gw, rd, disp, notif := at("gateway"), at("renderer"), at("dispatcher"), at("notifier")
	require.True(t, gw < rd && rd < disp && disp < notif, "stopped out of order (gateway, renderer, dispatcher, notifier):\n%s", logs)
}
