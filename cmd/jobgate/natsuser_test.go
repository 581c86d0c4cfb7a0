package main

import (
	"os"
	"path/filepath"
	"strings"

	"bytes"
	"context"
	"encoding/json"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/nats-io/nats-server/v2/server"
	"io"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/system"
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

// For an operator-run NATS, `nats-user --worker --type T` prints a user
// block that a real nats-server loads; logged in with it, a worker may send
// its type's requests and nothing else.
func TestNATSUserWorkerBlockForAnOperatorRunNATS(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	require.NoError(t, m.Run(context.Background(), []string{"nats-user", "--worker", "--type", "export_sales",
		"--nats", "nats://127.0.0.1:1"}))
	text := out.String()
	block := text[:strings.Index(text, "# The worker connects with:")]
	var user, pass string
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "JOBGATE_WORKER_USER="); ok {
			user = v
		}
		if v, ok := strings.CutPrefix(line, "JOBGATE_WORKER_PASSWORD="); ok {
			pass = v
		}
	}
	require.Equal(t, "jgw.export_sales", user)
	conf := filepath.Join(t.TempDir(), "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte("listen: 127.0.0.1:-1\n"+block), 0o600))
	opts, err := server.ProcessConfigFile(conf)
	require.NoError(t, err, "the printed block is valid nats-server configuration:\n%s", block)
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	require.NoError(t, err)
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	require.True(t, srv.ReadyForConnections(10*time.Second))
	cred := wire.CredentialID(user)
	errs := make(chan error, 8)
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, pass), nats.CustomInboxPrefix(wire.InboxPrefix(cred)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.Publish("$JS.API.INFO", nil))
	require.NoError(t, nc.Flush())
	select {
	case err := <-errs:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
	case <-time.After(5 * time.Second):
		t.Fatal("the JetStream API was not refused")
	}
	_, err = nc.Request(wire.Subject(cred, "export_sales", wire.OpNext), []byte(`{}`), 300*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrNoResponders, "its own requests go out")
}

// `jobgate nats-user` run with the data dir alone prints the URL that
// `serve --nats-listen` listens on (a flag of another process), and none
// once that server stopped (issue 34).
func TestNATSUserPrintsTheURLServeListensOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := config.Default()
	cfg.DataDir, cfg.NATS.Listen = dir, "127.0.0.1:-1"
	sys, err := system.Start(ctx, system.Config{Settings: &cfg, Components: []system.Component{system.Dispatcher}, LogOutput: io.Discard})
	require.NoError(t, err)
	require.NotEmpty(t, sys.NATSURL())

	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	for _, args := range [][]string{{"--worker", "--type", "csv_export"}, {"--tenant", "5"}} {
		out.Reset()
		require.NoError(t, m.Run(ctx, append([]string{"nats-user", "--data-dir", dir, "--json"}, args...)))
		var creds struct{ URL string }
		require.NoError(t, json.Unmarshal(out.Bytes(), &creds))
		require.Equal(t, sys.NATSURL(), creds.URL, "%v", args)
	}
	out.Reset()
	require.NoError(t, m.Run(ctx, []string{"nats-user", "--data-dir", dir, "--worker", "--type", "csv_export"}))
	require.Contains(t, out.String(), "url:        "+sys.NATSURL())

	require.NoError(t, sys.Stop(context.Background()))
	out.Reset()
	require.NoError(t, m.Run(ctx, []string{"nats-user", "--data-dir", dir, "--worker", "--type", "csv_export", "--json"}))
	var creds struct{ URL string }
	require.NoError(t, json.Unmarshal(out.Bytes(), &creds))
	require.Empty(t, creds.URL, "no server listens any more")
}
