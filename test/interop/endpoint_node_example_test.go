package interop

import (
	"bufio"
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

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/workertest/jobgatetest"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestEndpointNodeExample walks examples/endpoint-node's README against a
// whole jobgate allowing loopback endpoints (as serve --dev does): its
// types.yaml declares the type, its server (node's http module, npm's
// standardwebhooks verifying the signature) answers the attempts, and a job
// submitted over HTTP succeeds with the greeting; an unsigned request is
// refused. Without node or the example's packages (`npm ci` there;
// scripts/ensure-interop.sh does it) it fails, or skips when
// JOBGATE_SKIP_INTEROP=1 (never under CI=true).
func TestEndpointNodeExample(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	t.Parallel()
	dir := endpointNodeExample(t)
	d := jobgatetest.StartWith(t, jobgatetest.Options{LoopbackEndpoints: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	operator, err := d.OperatorToken("ops")
	require.NoError(t, err)
	user, err := d.Token("acme", "ann")
	require.NoError(t, err)

	// The type as types.yaml declares it; the URL names the port the
	// server got, as the README's 9092 may be taken here.
	var decl map[string]any
	data, err := os.ReadFile(filepath.Join(dir, "types.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &decl))
	name := decl["name"].(string)
	delete(decl, "name")
	ep := decl["endpoint"].(map[string]any)
	require.Equal(t, "http://127.0.0.1:9092/jobs/greeting", ep["url"], "the README's URL")

	// The secret is shown once the type is created, and the server needs it
	// to start: declare first with the port reserved by the server's
	// placeholder URL, then point the type at the server (a change keeps
	// the secret).
	ops, err := client.New(d.URL(), operator)
	require.NoError(t, err)
	ep["url"] = "http://127.0.0.1:9/jobs/greeting"
	applied, err := ops.Admin().ApplyEndpointType(ctx, name, decl)
	require.NoError(t, err)
	require.Equal(t, client.Created, applied.Outcome)

	node := exec.CommandContext(ctx, "node", "server.js")
	node.Dir = dir
	node.Env = jobtest.ChildEnv("JOBGATE_ENDPOINT_SECRET="+applied.Type.Endpoint.Secret, "PORT=0")
	var stderr strings.Builder
	node.Stderr = &stderr
	stdout, err := node.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, node.Start())
	t.Cleanup(func() {
		_ = node.Process.Signal(os.Interrupt)
		_ = node.Wait()
	})
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "the server's first line; stderr: %s", stderr.String())
	var up struct {
		Listening string `json:"listening"`
	}
	require.NoError(t, json.Unmarshal(sc.Bytes(), &up), "the server printed %q", sc.Text())
	go func() {
		for sc.Scan() {
		}
	}()
	ep["url"] = up.Listening
	applied, err = ops.Admin().ApplyEndpointType(ctx, name, decl)
	require.NoError(t, err)
	require.Equal(t, client.Changed, applied.Outcome)

	ann, err := client.New(d.URL(), user)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := ann.Submit(ctx, name, map[string]any{"name": "Ada", "language": "fr"}, client.WithKey("hello-node-1"))
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the gateway accepts the type within moments")
	sub, err := ann.Submit(ctx, name, map[string]any{"name": "Ada", "language": "fr"}, client.WithKey("hello-node-1"))
	require.NoError(t, err)
	res, err := ann.Wait(ctx, sub.Job.ID, nil)
	require.NoError(t, err)
	require.Equal(t, api.StateSucceeded, res.State, "job: %+v; node: %s", res, stderr.String())
	var out strings.Builder
	_, err = ann.Download(ctx, res.ID, &out)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("Bonjour, Ada! (job %s, attempt 1)\n", res.ID), out.String())

	// Unsigned: refused before any work.
	resp, err := http.Post(up.Listening, "application/json", strings.NewReader(`{"job":{"id":"x","attempt":1}}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// endpointNodeExample is examples/endpoint-node once node and its pinned
// packages are there. Missing, it fails the test, or skips it when
// JOBGATE_SKIP_INTEROP=1 and CI is not true.
func endpointNodeExample(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(jobtest.RepoRoot(t), "examples", "endpoint-node")
	if missing := jobtest.NodeMissing(dir, nil, "standardwebhooks"); missing != "" {
		t.Skip(jobtest.InteropMissing(t, missing, "the Node endpoint example's test", dir))
	}
	return dir
}
