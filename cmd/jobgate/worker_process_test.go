package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/test/jobtest"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// echoParams are the params of the test's own job type: a user's type,
// declared and run by a separate worker process written with pkg/worker.
type echoParams struct {
	Text  string `json:"text"`
	Lines int    `json:"lines"`
}

var echoSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["text","lines"],
 "properties":{"text":{"type":"string","maxLength":64},"lines":{"type":"integer","minimum":1,"maximum":1000}}}`)

// TestHelperWorkerProcess is a worker program (when JOBGATE_WORKER_HELPER
// names a NATS URL): it runs the slow_echo type, one line every 100ms,
// until SIGTERM.
func TestHelperWorkerProcess(t *testing.T) {
	url := os.Getenv("JOBGATE_WORKER_HELPER")
	if url == "" {
		t.Skip("helper process only")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w, err := worker.New(worker.Config{
		URL: url, User: os.Getenv("JOBGATE_WORKER_USER"), Password: os.Getenv("JOBGATE_WORKER_PASSWORD"),
		Name: "echo-" + strconv.Itoa(os.Getpid()), HeartbeatInterval: 500 * time.Millisecond, PullWait: time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = worker.Register(w, worker.Type[echoParams]{
		Name: "slow_echo", Schema: echoSchema, ContentType: "text/plain", Timeout: time.Minute, Concurrency: 1,
		Work: func(ctx context.Context, j *worker.Job[echoParams]) error {
			for i := range j.Params.Lines {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := fmt.Fprintf(j.Output(), "%d %s\n", i+1, j.Params.Text); err != nil {
					return err
				}
				j.Progress(i+1, j.Params.Lines, "lines")
			}
			return nil
		},
	})
	if err == nil {
		err = w.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func startWorkerProcess(t *testing.T, url, user, pass string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorkerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "JOBGATE_WORKER_HELPER="+url, "JOBGATE_WORKER_USER="+user, "JOBGATE_WORKER_PASSWORD="+pass)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("worker process %d:\n%s", cmd.Process.Pid, out.String())
		}
	})
	return cmd
}

// A user's job type, run by worker processes of its own on the worker
// credentials of `jobgate nats-user --worker`: declared to a gateway that was
// already running, validated, and when the worker running a job is killed
// with SIGKILL, another worker process finishes it; one result, one
// terminal state, each change announced once to a tenant's plain NATS
// subscriber. The worker credentials reach nothing else.
func TestWorkerProcessKilledMidJobIsFinishedByAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	dir, addr, natsAddr := t.TempDir(), jobtest.FreeAddr(t), jobtest.FreeAddr(t)
	serve := startJobgate(t, "serve", "--data-dir", dir, "--http-addr", addr, "--nats-listen", natsAddr)
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, serve.out.String())
	url := "nats://" + natsAddr

	creds := func(args ...string) map[string]string {
		var out bytes.Buffer
		m := &Main{Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
		require.NoError(t, m.Run(context.Background(), append([]string{"nats-user", "--data-dir", dir, "--json"}, args...)))
		var c map[string]string
		require.NoError(t, json.Unmarshal(out.Bytes(), &c))
		return c
	}
	wc, tc := creds("--worker", "--type", "slow_echo"), creds("--tenant", "4")

	// What the worker credentials cannot do.
	wnc, err := nats.Connect(url, nats.UserInfo(wc["user"], wc["password"]), nats.CustomInboxPrefix("_JG_WORKER_INBOX"))
	require.NoError(t, err)
	defer wnc.Close()
	denied := make(chan error, 4)
	wnc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied <- err })
	_, err = wnc.SubscribeSync("jobgate.events.5.>")
	require.NoError(t, err)
	require.NoError(t, wnc.Flush())
	select {
	case err := <-denied:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
	case <-time.After(10 * time.Second):
		t.Fatal("a worker could subscribe to a tenant's events")
	}
	wjs, err := jetstream.New(wnc)
	require.NoError(t, err)
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	err = wjs.DeleteStream(dctx, "JOBGATE_WORK")
	dcancel()
	require.Error(t, err, "a worker deleted the work stream")
	// The attacks of issue 22, with the type's own credential: each
	// publish is a permissions violation, so nothing reaches JetStream.
	for what, subject := range map[string]string{
		"list every job key":        "$JS.API.STREAM.INFO.KV_JOBGATE_JOBS",
		"write a record":            "$KV.JOBGATE_JOBS.4.reviewer-47.job_x",
		"delete a record":           "$JS.API.STREAM.MSG.DELETE.KV_JOBGATE_JOBS",
		"read a result directly":    "$JS.API.DIRECT.GET.OBJ_JOBGATE_RESULTS",
		"purge the results":         "$JS.API.STREAM.PURGE.OBJ_JOBGATE_RESULTS",
		"create a consumer":         "$JS.API.CONSUMER.CREATE.JOBGATE_WORK.x",
		"delete a work consumer":    "$JS.API.CONSUMER.DELETE.JOBGATE_WORK.x",
		"forge an event":            "jobgate.events.4.reviewer-47.job_never",
		"take permit_report's work": wire.Subject(wire.CredentialID(wc["user"]), "permit_report", wire.OpNext),
		"speak for jobgate":         wire.Subject(wire.JobgateCredential, "slow_echo", wire.OpNext),
	} {
		require.NoError(t, wnc.Publish(subject, []byte(`{}`)))
		require.NoError(t, wnc.Flush())
		select {
		case err := <-denied:
			require.ErrorIs(t, err, nats.ErrPermissionViolation, what)
		case <-time.After(10 * time.Second):
			t.Fatalf("a worker could %s", what)
		}
	}

	// The tenant's plain subscriber counts the announcements.
	tnc, err := nats.Connect(url, nats.UserInfo(tc["user"], tc["password"]))
	require.NoError(t, err)
	defer tnc.Close()
	events, err := tnc.SubscribeSync(tc["subject"])
	require.NoError(t, err)
	require.NoError(t, tnc.Flush())

	tok := mintToken(t, dir, "4", "reviewer-47")
	body := `{"type":"slow_echo","params":{"text":"<b>hello</b>","lines":40}}`
	status, _ := postJob(t, addr, tok, "before-any-worker", body)
	require.Equal(t, http.StatusUnprocessableEntity, status, "no worker declared slow_echo yet")

	a := startWorkerProcess(t, url, wc["user"], wc["password"])
	// The running gateway accepts the type within moments of the worker's start.
	var id string
	require.Eventually(t, func() bool {
		st, j := postJob(t, addr, tok, "echo-1", body)
		if st == http.StatusAccepted {
			id = j["id"].(string)
		}
		return st == http.StatusAccepted
	}, 30*time.Second, 100*time.Millisecond)
	st, p := postJob(t, addr, tok, "echo-bad", `{"type":"slow_echo","params":{"text":"x","lines":0}}`)
	require.Equal(t, http.StatusUnprocessableEntity, st)
	require.Contains(t, fmt.Sprint(p["errors"]), "/params/lines")

	get := func() map[string]any {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/jobs/"+id, nil)
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
	require.Eventually(t, func() bool {
		j := get()
		pr, _ := j["progress"].(map[string]any)
		return j["state"] == "running" && pr != nil && pr["done"].(float64) > 0
	}, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, a.Process.Signal(syscall.SIGKILL))
	_, _ = a.Process.Wait()

	startWorkerProcess(t, url, wc["user"], wc["password"])
	var done map[string]any
	// Polled below the requester's read rate (20/s), so the reads after it
	// are not refused with 429.
	require.Eventually(t, func() bool { done = get(); return done["state"] == "succeeded" }, 60*time.Second, 100*time.Millisecond)
	require.EqualValues(t, 2, done["attempt"], "the second worker took the job over")

	// The result: every line, once.
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/jobs/"+id+"/result", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var resp *http.Response
	require.Eventually(t, func() bool { // a 429 from the polling above passes with its Retry-After
		var err error
		resp, err = noFollow.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode != http.StatusTooManyRequests
	}, 10*time.Second, 200*time.Millisecond)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, err = http.Get(base + resp.Header.Get("Location"))
	require.NoError(t, err)
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/plain", resp.Header.Get("Content-Type"))
	require.Equal(t, `attachment; filename="`+id+`.txt"`, resp.Header.Get("Content-Disposition"))
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	require.Len(t, lines, 40)
	require.Equal(t, "40 <b>hello</b>", lines[39])

	// One announcement per stored change, one terminal one.
	ids, terminal := map[string]bool{}, 0
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		m, err := events.NextMsg(500 * time.Millisecond)
		if errors.Is(err, nats.ErrTimeout) {
			if terminal > 0 {
				break
			}
			continue
		}
		require.NoError(t, err)
		if !strings.HasSuffix(m.Subject, "."+id) {
			continue
		}
		mid := m.Header.Get("Nats-Msg-Id")
		require.False(t, ids[mid], "change %s announced twice", mid)
		ids[mid] = true
		var r map[string]any
		require.NoError(t, json.Unmarshal(m.Data, &r))
		if s := r["state"]; s == "succeeded" || s == "failed" || s == "canceled" {
			terminal++
		}
	}
	require.Equal(t, 1, terminal)
	require.GreaterOrEqual(t, len(ids), 4, "queued, running, progress, succeeded at least")
}
