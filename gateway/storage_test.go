package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// setupBudget is setup on a layout whose byte budgets a test fills in
// moments.
func setupBudget(t *testing.T, budget int64) (*Gateway, *testBundle) {
	t.Helper()
	b := &testBundle{dir: t.TempDir(), secret: []byte("test-secret"), clock: &testClock{}}
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: b.dir})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect("gateway-test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	layout := natsjs.DefaultLayout()
	layout.StoreMaxBytes, layout.ResultsMaxBytes = budget, budget
	res, err := natsjs.Provision(ctx, js, layout)
	require.NoError(t, err)
	jobtest.DeclareTypes(t, res)
	g, err := New(Config{Addr: "127.0.0.1:0", AuthSecret: b.secret, Now: b.clock.now, ReadRate: 1000, ReadBurst: 1000,
		SubmitRate: 1e6, SubmitBurst: 1e6, Metrics: metrics.New()}, storesOf(res), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NoError(t, g.Start(ctx))
	t.Cleanup(func() { require.NoError(t, g.Stop(context.Background())) })
	b.emb, b.res, b.url = emb, res, "http://"+g.Addr()
	b.http = &http.Client{
		Transport:     &validatingTransport{t: t, next: http.DefaultTransport, router: specRouter(t, b.url)},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return g, b
}

// Filling the job records' budget: admission stops at 90% of it with 507
// storage-full and writes nothing, while the keys it took still replay and
// the jobs it holds stay readable.
func TestAdmissionAnswersStorageFullBeforeTheBudgetIsUsedUp(t *testing.T) {
	t.Parallel()
	const budget = 64 << 10
	g, b := setupBudget(t, budget)
	tok := b.token(t, "4", "reviewer-47", false)

	var full response
	admitted := 0
	for i := 0; i < 1000; i++ {
		b.clock.advance(storageRecheck) // every admission reads the budgets afresh
		r := b.submit(t, tok, fmt.Sprintf("k-%d", i), permit)
		if r.status != http.StatusAccepted {
			full = r
			break
		}
		admitted++
	}
	require.Equal(t, http.StatusInsufficientStorage, full.status, "body: %s", full.body)
	require.Equal(t, "/problems/storage-full", full.json(t)["type"])
	require.Equal(t, "60", full.header.Get("Retry-After"))
	require.Positive(t, admitted)
	require.Equal(t, admitted, b.countJobs(t), "the refused admission wrote no record")

	// It was the 90% mark that refused it, not JetStream at 100%: room is
	// left for the jobs already admitted.
	use, err := b.res.StorageUse(context.Background())
	require.NoError(t, err)
	fullest := 0.0
	for _, u := range use {
		require.Less(t, u.Bytes, u.MaxBytes, u.Resource)
		fullest = max(fullest, float64(u.Bytes)/float64(u.MaxBytes))
	}
	require.GreaterOrEqual(t, fullest, admitBelow)
	require.Less(t, fullest, 0.95)

	again := b.submit(t, tok, fmt.Sprintf("k-%d", admitted), permit)
	require.Equal(t, http.StatusInsufficientStorage, again.status, "the same key again: still nothing admitted")
	replay := b.submit(t, tok, "k-0", permit)
	require.Equal(t, http.StatusOK, replay.status, "a key already taken still answers with its job")
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs/"+replay.job(t).ID, tok, "").status)

	require.EqualValues(t, budget, value(t, g.cfg.Metrics.StorageBudget.WithLabelValues(natsjs.BucketJobs)))
	require.Positive(t, value(t, g.cfg.Metrics.StorageBytes.WithLabelValues(natsjs.BucketJobs)))
	require.EqualValues(t, 2, value(t, g.cfg.Metrics.Admissions.WithLabelValues("storage_full")))
	require.Equal(t, 2.0, scrape(t, b)[`jobgate_http_storage_full_total{route="/v1/jobs"}`], "the 507s on their own counter")
}

func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	require.NoError(t, m.Write(&d))
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
