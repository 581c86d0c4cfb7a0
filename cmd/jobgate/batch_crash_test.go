package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// startCrashing runs `jobgate serve` as a process of its own with the
// failpoints given and waits until it answers.
func startCrashing(t *testing.T, dir, addr, failpoints string) (*exec.Cmd, *syncBuffer, chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServeProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "JOBGATE_SERVE_HELPER_ARGS=serve --data-dir "+dir+" --http-addr "+addr,
		"JOBGATE_FAILPOINTS="+failpoints)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, out.String())
	return cmd, out, exited
}

// waitCrash waits for the process to exit as a failpoint's exit does (3).
func waitCrash(t *testing.T, exited chan error, out *syncBuffer, what string) {
	t.Helper()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s: %s", what, out)
		require.Equal(t, 3, ee.ExitCode(), "%s: %s", what, out)
		require.Contains(t, out.String(), "failpoint", what)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: the process did not crash\n%s", what, out)
	}
}

// inspect opens the stopped deployment's JetStream and hands its
// resources to check.
func inspect(t *testing.T, dir string, check func(res *natsjs.Resources)) {
	t.Helper()
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
	check(res)
}

func streamMsgs(t *testing.T, res *natsjs.Resources, stream string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := res.JS.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	return int(info.State.Msgs)
}

// A batch survives the crashes around its admission, each a real process
// exiting at a failpoint: the gateway's right after its commit of the
// batch record (no job created yet, no answer sent), then the next
// process's batch relay half way through the jobs. The third process
// finishes the admission; the client's retry with the same key gets the
// batch (200), and every item is exactly one job, announced once and run
// to success.
func TestBatchAdmittedOnceThroughCrashes(t *testing.T) {
	dir := t.TempDir()
	addr := jobtest.FreeAddr(t)
	const n = 20
	var sb strings.Builder
	sb.WriteString(`{"jobs":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"type":"permit_report","params":{"case_id":%d,"revision":1,"pages":1}}`, i+1)
	}
	sb.WriteString(`]}`)
	body := sb.String()
	post := func(tok string) (int, map[string]any, error) {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/batches", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", "batch-through-crashes")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m, nil
	}

	// 1: the gateway dies between the batch's commit and its jobs.
	_, out, exited := startCrashing(t, dir, addr, "gateway.batch-after-commit=exit")
	tok := mintToken(t, dir, "4", "reviewer-47")
	_, _, err := post(tok)
	require.Error(t, err, "the client gets no answer")
	waitCrash(t, exited, out, "gateway after its commit")
	inspect(t, dir, func(res *natsjs.Resources) {
		require.Equal(t, 1, streamMsgs(t, res, "KV_"+natsjs.BucketBatches), "the batch is committed")
		require.Zero(t, streamMsgs(t, res, "KV_"+natsjs.BucketJobs), "and none of its jobs")
	})

	// 2: the next process's batch relay dies half way through the jobs.
	_, out, exited = startCrashing(t, dir, addr, "dispatcher.batch-mid-items=exit")
	waitCrash(t, exited, out, "batch relay mid-items")
	inspect(t, dir, func(res *natsjs.Resources) {
		jobs := streamMsgs(t, res, "KV_"+natsjs.BucketJobs)
		require.GreaterOrEqual(t, jobs, n/2, "the relay got half way")
		require.LessOrEqual(t, jobs, n, "no job twice")
	})

	// 3: a process without faults finishes; the client's retry replays.
	stop, _ := runServe(t, dir, addr)
	status, got, err := post(tok)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%v", got)
	require.Len(t, got["jobs"], n)
	batchID := got["id"].(string)
	ids := make([]string, n)
	for i, j := range got["jobs"].([]any) {
		ids[i] = j.(map[string]any)["id"].(string)
	}
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/batches/"+batchID, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var v struct {
			Done bool `json:"done"`
		}
		return json.NewDecoder(resp.Body).Decode(&v) == nil && v.Done
	}, 120*time.Second, 100*time.Millisecond, "every job of the batch ends")
	stop()

	inspect(t, dir, func(res *natsjs.Resources) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		keys, err := res.Jobs.KV().ListKeys(ctx)
		require.NoError(t, err)
		var stored []string
		for k := range keys.Keys() {
			stored = append(stored, k)
		}
		require.Len(t, stored, n, "every item exactly one job")
		for _, id := range ids {
			rec, err := res.Jobs.Get(ctx, job.StoreKey("4", "reviewer-47", id))
			require.NoError(t, err, id)
			require.Equal(t, job.StateSucceeded, rec.State)
			// The crashed process's renderer may have claimed a job before
			// the exit (more likely the more loaded the machine): that
			// attempt is cut short and the job runs once more.
			require.Contains(t, []int{1, 2}, rec.Attempt, "run, and again only after the crash")
			events := jobtest.Events(t, res, rec)
			require.NotEmpty(t, events)
			require.Equal(t, job.StateQueued, events[0].Resource.State, "announced")
			queued := 0
			for _, e := range events {
				if e.Resource.State == job.StateQueued {
					queued++
				}
			}
			require.Equal(t, 1, queued, "the admission of %s announced once", id)
		}
	})
}
