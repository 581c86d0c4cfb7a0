package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/system"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// The credentials `jobgate nats-user` prints open the embedded server that
// `serve --nats-listen` runs, for the tenant's events only, while the
// process's own connection keeps full access.
func TestNATSUserCredentialsOnListeningServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	require.NoError(t, m.Run(ctx, []string{"nats-user", "--data-dir", dir, "--tenant", "5", "--json"}))
	var creds struct{ User, Password, Subject string }
	require.NoError(t, json.Unmarshal(out.Bytes(), &creds))
	require.Equal(t, "tenant-5", creds.User)
	require.Equal(t, "jobgate.events.5.>", creds.Subject)

	cfg := config.Default()
	cfg.DataDir, cfg.NATS.Listen = dir, "127.0.0.1:-1"
	sys, err := system.Start(ctx, system.Config{Settings: &cfg, Components: []system.Component{system.Dispatcher}, LogOutput: io.Discard})
	require.NoError(t, err, "in-process connections provision everything under tenant auth")
	defer func() { require.NoError(t, sys.Stop(context.Background())) }()

	errs := make(chan error, 4)
	nc, err := nats.Connect(sys.NATSURL(), nats.UserInfo(creds.User, creds.Password),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	require.NoError(t, err)
	defer nc.Close()
	own, err := nc.SubscribeSync(creds.Subject)
	require.NoError(t, err)
	_, err = nc.SubscribeSync("jobgate.events.4.>")
	require.NoError(t, err)
	select {
	case err := <-errs:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
	case <-ctx.Done():
		t.Fatal("tenant 5 may subscribe to tenant 4's events")
	}
	now := time.Now().UTC()
	for _, tenant := range []string{"4", "5"} {
		r := &job.Record{ID: "job_t" + tenant, Tenant: tenant, Requester: "r", Type: "permit_report", Params: []byte(`{}`),
			State: job.StateQueued, CreatedAt: now, UpdatedAt: now}
		require.NoError(t, natsjs.PublishEvent(ctx, sys.Resources().JS, r))
	}
	msg, err := own.NextMsg(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "jobgate.events.5.r.job_t5", msg.Subject)

	// Running it again prints the same credentials.
	out.Reset()
	require.NoError(t, m.Run(ctx, []string{"nats-user", "--data-dir", dir, "--tenant", "5", "--json"}))
	var again struct{ Password string }
	require.NoError(t, json.Unmarshal(out.Bytes(), &again))
	require.Equal(t, creds.Password, again.Password)
}

func TestNATSUserRefusesExternalNATSAndBadTenant(t *testing.T) {
	t.Parallel()
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), []string{"nats-user", "--data-dir", t.TempDir(), "--tenant", "5", "--nats", "nats://example.test:4222"})
	require.Error(t, err)
	require.Equal(t, 2, ExitCode(err))
	err = m.Run(context.Background(), []string{"nats-user", "--data-dir", t.TempDir(), "--tenant", "a.b"})
	require.Error(t, err)
	require.Equal(t, 2, ExitCode(err))
}
