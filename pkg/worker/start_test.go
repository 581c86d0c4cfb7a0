package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/stretchr/testify/require"
)

type none struct{}

var closed = json.RawMessage(`{"type":"object","additionalProperties":false}`)

// listening starts an embedded server that takes worker logins, as
// `serve --nats-listen` does.
func listening(t *testing.T) (url string, secret []byte) {
	t.Helper()
	secret = []byte("0123456789abcdef0123456789abcdef")
	auth, err := natsserver.NewTenantAuth(secret)
	require.NoError(t, err)
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:-1", Configure: auth.Configure})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	return emb.ClientURL(), secret
}

func startWith(t *testing.T, cfg worker.Config, name string) (time.Duration, error) {
	t.Helper()
	w, err := worker.New(cfg)
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[none]{Name: name, Schema: closed,
		Work: func(context.Context, *worker.Job[none]) error { return nil }}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	err = w.Start(ctx)
	took := time.Since(began)
	if err == nil {
		require.NoError(t, w.Stop(context.Background()))
	}
	return took, err
}

// A worker with a wrong password or an unreachable URL fails Start at once
// with an error naming the URL and the cause, instead of hanging.
func TestStartFailsFastOnWrongCredentialsOrURL(t *testing.T) {
	t.Parallel()
	url, secret := listening(t)
	user, err := natsserver.WorkerUser([]string{"export_sales"})
	require.NoError(t, err)
	took, err := startWith(t, worker.Config{URL: url, User: user, Password: "wrong"}, "export_sales")
	require.Error(t, err)
	require.Less(t, took, 10*time.Second)
	require.ErrorContains(t, err, url)
	require.ErrorContains(t, err, "user or password is wrong")

	took, err = startWith(t, worker.Config{URL: "nats://127.0.0.1:1", User: user, Password: natsserver.WorkerPassword(secret, user)}, "export_sales")
	require.Error(t, err)
	require.Less(t, took, 10*time.Second)
	require.ErrorContains(t, err, "nats://127.0.0.1:1")
}

// A type the credential was not made for fails Start at once, naming the
// type and how to mint a credential for it; a built-in type cannot even be
// registered by a user's worker.
func TestStartFailsFastForATypeTheCredentialMayNotRun(t *testing.T) {
	t.Parallel()
	url, secret := listening(t)
	user, err := natsserver.WorkerUser([]string{"export_sales"})
	require.NoError(t, err)
	cfg := worker.Config{URL: url, User: user, Password: natsserver.WorkerPassword(secret, user)}
	took, err := startWith(t, cfg, "other_type")
	require.Error(t, err)
	require.Less(t, took, 10*time.Second)
	require.ErrorContains(t, err, "may not run type other_type")

	w, err := worker.New(cfg)
	require.NoError(t, err)
	err = worker.Register(w, worker.Type[none]{Name: "permit_report", Schema: closed,
		Work: func(context.Context, *worker.Job[none]) error { return nil }})
	require.ErrorContains(t, err, "built-in")
}
