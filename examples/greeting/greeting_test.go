package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/workertest"
	"github.com/jobgate/jobgate/pkg/workertest/jobgatetest"
	"github.com/stretchr/testify/require"
)

// The handler alone, in process: the schema's default applies, every line
// is written and counted.
func TestGreetingHandler(t *testing.T) {
	t.Parallel()
	res, err := workertest.Run(t.Context(), greeting(), map[string]any{"name": "Ada"})
	require.NoError(t, err)
	require.Equal(t, workertest.Succeeded, res.Outcome)
	require.Equal(t, "Hello, Ada! (1)\nHello, Ada! (2)\nHello, Ada! (3)\n", string(res.Output))
	require.Equal(t, &api.Progress{Done: 3, Total: 3, Unit: "lines"}, res.Progress)

	_, err = workertest.Run(t.Context(), greeting(), Params{Name: "Ada", Times: 101})
	require.ErrorIs(t, err, api.ErrValidation, "the gateway would answer 422")
}

// The worker as main runs it, against a whole jobgate in this process, with
// the credentials `jobgate nats-user --worker --type greeting --env` prints,
// read from the environment.
func TestGreetingEndToEnd(t *testing.T) {
	d := jobgatetest.Start(t)
	creds, err := d.WorkerCredentials("greeting")
	require.NoError(t, err)
	t.Setenv("JOBGATE_NATS_URL", creds.URL)
	t.Setenv("JOBGATE_WORKER_USER", creds.User)
	t.Setenv("JOBGATE_WORKER_PASSWORD", creds.Password)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); main() }()
	t.Cleanup(func() {
		// main runs until an interrupt; end it as Ctrl-C would.
		require.NoError(t, interrupt())
		<-done
	})
	require.NoError(t, d.WaitForType(ctx, "greeting"))

	tok, err := d.Token("4", "reviewer-47")
	require.NoError(t, err)
	c, err := client.New(d.URL(), tok, client.WithoutJournal())
	require.NoError(t, err)
	sub, err := c.Submit(ctx, "greeting", Params{Name: "Grace", Times: 2})
	require.NoError(t, err)
	res, err := c.Wait(ctx, sub.Job.ID, nil)
	require.NoError(t, err)
	require.Equal(t, api.StateSucceeded, res.State)
	var out strings.Builder
	_, err = c.Download(ctx, res.ID, &out)
	require.NoError(t, err)
	require.Equal(t, "Hello, Grace! (1)\nHello, Grace! (2)\n", out.String())
}

// interrupt sends this process the signal Ctrl-C sends; main catches it.
func interrupt() error {
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		return err
	}
	return p.Signal(os.Interrupt)
}
