package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/endpoint"
	"github.com/jobgate/jobgate/pkg/workertest/jobgatetest"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The README's walk through, against a whole jobgate: types.yaml
// declares the type, this handler answers its attempts, and a job
// succeeds with the greeting; a language it does not know fails the job
// with the handler's words.
func TestTheGreetingEndpointEndToEnd(t *testing.T) {
	t.Parallel()
	d := jobgatetest.StartWith(t, jobgatetest.Options{LoopbackEndpoints: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	operator, err := d.OperatorToken("ops")
	require.NoError(t, err)
	user, err := d.Token("acme", "ann")
	require.NoError(t, err)

	// The handler on a port of its own, where types.yaml points.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var decl map[string]any
	data, err := os.ReadFile("types.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &decl))
	name := decl["name"].(string)
	delete(decl, "name")
	decl["endpoint"].(map[string]any)["url"] = "http://" + ln.Addr().String() + "/jobs/greeting"

	ops, err := client.New(d.URL(), operator)
	require.NoError(t, err)
	applied, err := ops.Admin().ApplyEndpointType(ctx, name, decl)
	require.NoError(t, err)
	require.Equal(t, client.Created, applied.Outcome)

	h, err := newHandler(applied.Type.Endpoint.Secret)
	require.NoError(t, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	ann, err := client.New(d.URL(), user)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := ann.Submit(ctx, "greeting", map[string]any{"name": "Ada", "language": "fr"}, client.WithKey("hello-1"))
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the gateway accepts the type within moments")
	sub, err := ann.Submit(ctx, "greeting", map[string]any{"name": "Ada", "language": "fr"}, client.WithKey("hello-1"))
	require.NoError(t, err)
	res, err := ann.Wait(ctx, sub.Job.ID, nil)
	require.NoError(t, err)
	require.Equal(t, api.StateSucceeded, res.State)
	var out strings.Builder
	_, err = ann.Download(ctx, res.ID, &out)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("Bonjour, Ada! (job %s, attempt 1)\n", res.ID), out.String())

	sub, err = ann.Submit(ctx, "greeting", map[string]any{"name": "Ada", "language": "de"}, client.WithKey("hello-2"))
	require.NoError(t, err)
	res, err = ann.Wait(ctx, sub.Job.ID, nil)
	require.NoError(t, err)
	require.Equal(t, api.StateSucceeded, res.State)

	// Unsigned requests are refused before any work.
	resp, err := http.Post("http://"+ln.Addr().String()+"/jobs/greeting", "application/json", strings.NewReader(`{"job":{"id":"x","attempt":1}}`))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// A language the handler does not know is the owner's to fix: refused,
// not retried; "later" asks to be tried again.
func TestTheAnswers(t *testing.T) {
	t.Parallel()
	answer := func(params string) endpoint.Answer {
		return greet(context.Background(), &endpoint.Attempt{ID: "job_x", Attempt: 1, Params: json.RawMessage(params)})
	}
	require.Equal(t, http.StatusOK, answer(`{"name":"Ada","language":"en"}`).Status())
	require.Equal(t, http.StatusUnprocessableEntity, answer(`{"name":"Ada","language":"xx"}`).Status())
	require.Equal(t, http.StatusUnprocessableEntity, answer(`[1]`).Status())
	require.Equal(t, http.StatusServiceUnavailable, answer(`{"name":"later","language":"en"}`).Status())
}
