package worker_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/tenantquota"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/system"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// A result that jobgate refuses because it would take its tenant past the
// result quota has already failed its job (budget_exceeded): the worker
// logs the refusal as a warning, reports no failure of its own (which
// would only be answered lost) and counts the attempt failed, not as an
// internal error.
func TestAResultRefusedForTheQuotaIsNotReported(t *testing.T) {
	t.Parallel()
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr, settings.NATS.Listen = t.TempDir(), "127.0.0.1:0", "127.0.0.1:-1"
	settings.TenantResultsMaxBytes = tenantquota.MinMaxBytes
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: &jobtest.SyncBuffer{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })

	// Every fail request any worker sends, as the brokers receive them.
	spy, err := sys.OwnConn("spy")
	require.NoError(t, err)
	var fails atomic.Int32
	_, err = spy.Subscribe(wire.Root+"*.*."+wire.OpFail, func(*nats.Msg) { fails.Add(1) })
	require.NoError(t, err)
	require.NoError(t, spy.Flush())

	creds, err := sys.WorkerCredentials("export")
	require.NoError(t, err)
	logs := &jobtest.SyncBuffer{}
	var mu sync.Mutex
	var outcomes []string
	w, err := worker.New(worker.Config{URL: creds.URL, User: creds.User, Password: creds.Password,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnAttempt: func(_, outcome string, _ time.Duration) {
			mu.Lock()
			outcomes = append(outcomes, outcome)
			mu.Unlock()
		}})
	require.NoError(t, err)
	big := bytes.Repeat([]byte("x"), tenantquota.MinMaxBytes+tenantquota.MinMaxBytes/2)
	var handlerErr atomic.Value
	require.NoError(t, worker.Register(w, worker.Type[none]{Name: "export", Schema: closed, MaxResultBytes: 4 << 20,
		Work: func(_ context.Context, j *worker.Job[none]) error {
			if _, err := j.Output().Write(big); err != nil {
				handlerErr.Store(err)
			}
			return nil
		}}))
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })

	tok, err := sys.Token(auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour)
	require.NoError(t, err)
	c, err := client.New(sys.URL(), tok, client.WithoutJournal())
	require.NoError(t, err)
	sub, err := c.Submit(ctx, "export", none{})
	for i := 0; err != nil && i < 100; i++ { // the gateway takes the declaration a moment after Start
		time.Sleep(50 * time.Millisecond)
		sub, err = c.Submit(ctx, "export", none{})
	}
	require.NoError(t, err)
	done, err := c.Wait(ctx, sub.Job.ID, nil)
	require.NoError(t, err)
	require.Equal(t, api.StateFailed, done.State)
	require.Equal(t, api.CategoryBudgetExceeded, done.Error.Category, done.Error.Message)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(outcomes) == 1
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	require.Equal(t, []string{"failed"}, outcomes, "the attempt ended failed: by jobgate")
	mu.Unlock()
	require.NoError(t, spy.Flush())
	require.Zero(t, fails.Load(), "no failure reported for a job jobgate failed itself")
	out := logs.String()
	require.Contains(t, out, `level=WARN msg="result refused`, out)
	require.False(t, strings.Contains(out, "internal"), "no internal error: %s", out)
	require.Nil(t, handlerErr.Load(), "the handler's write is kept: the refusal is the worker's to handle")
}
