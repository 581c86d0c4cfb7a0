package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/gateway"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/index"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A record that reaches its TTL leaves a delete marker in the change log
// (Nats-Marker-Reason: MaxAge, no KV-Operation header). The relay treats it
// as the deletion it is: acknowledged, quietly, not an undecodable record.
func TestRelayTakesExpiryMarkersQuietly(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	conn := env.Connect(t, "test")
	logs := &syncLog{}
	d, err := New(testConfig(), storesOf(env.Connect(t, "dispatcher").Res), slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() { _ = d.Stop(context.Background()) })

	rec := env.Commit(t, conn.Res, jobtest.Request{Key: "short-lived", Pages: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A second record with a TTL of one second, in the same bucket: the
	// bucket's own TTL is far too long for a test.
	kv := conn.Res.Jobs.KV()
	e, err := kv.Get(ctx, rec.Key())
	require.NoError(t, err)
	short := rec.Key()[:len(rec.Key())-len(rec.ID)] + "job_expiresquicklyaaaaaaaaaa"
	_, err = kv.Create(ctx, short, e.Value(), jetstream.KeyTTL(time.Second))
	require.NoError(t, err)

	// The marker arrives once the key expired; then the change log drains.
	require.Eventually(t, func() bool {
		_, err := kv.Get(ctx, short)
		return err != nil
	}, 20*time.Second, 50*time.Millisecond, "the key expires")
	require.Eventually(t, func() bool {
		n, err := d.relayLog.Backlog(ctx)
		return err == nil && n == 0
	}, 20*time.Second, 50*time.Millisecond, "every change, the marker too, is acknowledged")
	require.NotContains(t, logs.String(), "level=ERROR")
	require.NotContains(t, logs.String(), "undecodable")
}

// A job still queued near the end of its retention fails expired, its one
// event is published, and its key keeps protecting it past the moment its
// record would have expired unchanged: the failure's write restarted the
// record's age. Real TTLs, one minute long (the shortest a layout takes).
func TestSweeperFailsAJobNearTheEndOfItsRetentionAndItsKeyOutlivesIt(t *testing.T) {
	t.Parallel()
	const ttl = time.Minute
	layout := natsjs.DefaultLayout()
	layout.JobTTL, layout.DuplicateWindow = ttl, 30*time.Second
	env := jobtest.Start(t)
	gwConn := env.ConnectLayout(t, "gateway", layout)
	jobtest.DeclareTypes(t, gwConn.Res) // no worker of it runs: the job stays queued
	secret := []byte("expiry-secret")
	res := gwConn.Res // as system's GatewayStores maps them
	g, err := gateway.New(gateway.Config{Addr: "127.0.0.1:0", AuthSecret: secret}, gateway.Stores{
		Jobs: res.Jobs, Work: res.Work, Events: res.Events, Secrets: res.Secrets, Files: res.Files, Types: res.Types,
		Batches: res.Batches, Storage: res, Changes: res.Jobs, Log: index.StoreSource(res.Jobs), Slots: res.Slots,
	}, testLogger())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, g.Start(ctx))
	t.Cleanup(func() { _ = g.Stop(context.Background()) })
	cfg := testConfig()
	cfg.ExpireMargin = ttl - 4*time.Second // expired 4 s after its admission
	d, err := New(cfg, storesOf(env.ConnectLayout(t, "dispatcher", layout).Res), testLogger())
	require.NoError(t, err)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() { _ = d.Stop(context.Background()) })

	tok, err := auth.Mint(secret, auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour, time.Now())
	require.NoError(t, err)
	submit := func() (int, http.Header, job.Resource) {
		req, err := http.NewRequest(http.MethodPost, "http://"+g.Addr()+"/v1/jobs",
			strings.NewReader(`{"type":"permit_report","params":{"case_id":47,"revision":29}}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", "expires-queued")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var r job.Resource
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		return resp.StatusCode, resp.Header, r
	}
	status, _, admitted := submit()
	require.Equal(t, http.StatusAccepted, status)
	key := job.StoreKey("4", "reviewer-47", admitted.ID)

	failed := jobtest.Terminal(t, gwConn.Res, key, 40*time.Second)
	require.Equal(t, job.StateFailed, failed.State)
	require.Equal(t, job.CategoryExpired, failed.Error.Category)
	require.True(t, failed.FinishedAt.Before(failed.CreatedAt.Add(ttl)), "failed before the record could expire")
	entry, err := gwConn.Res.Jobs.KV().Get(context.Background(), key)
	require.NoError(t, err)
	require.False(t, entry.Created().Before(failed.FinishedAt.Add(-time.Second)), "the failure is a new message: the record's age restarted")

	rec := &job.Record{ID: admitted.ID, Tenant: "4", Requester: "reviewer-47"}
	require.Eventually(t, func() bool { return len(jobtest.Events(t, gwConn.Res, rec)) == 2 }, 20*time.Second, 20*time.Millisecond)
	events := jobtest.Events(t, gwConn.Res, rec)
	require.Equal(t, []job.State{job.StateQueued, job.StateFailed}, jobtest.States(events), "the admission's event and one of the failure")
	require.Equal(t, fmt.Sprintf("%s.%d", failed.ID, failed.Revision), events[1].MsgID)
	require.Equal(t, job.CategoryExpired, events[1].Resource.Error.Category)

	replay := func() {
		t.Helper()
		status, h, r := submit()
		require.Equal(t, http.StatusOK, status, "the same key and params replay the failed job")
		require.Equal(t, "true", h.Get("Idempotent-Replayed"))
		require.Equal(t, admitted.ID, r.ID)
		require.Equal(t, job.StateFailed, r.State)
		require.Equal(t, job.CategoryExpired, r.Error.Category)
	}
	replay()
	// Read it until well past the moment the admission's write would
	// have expired: it must stay readable all along.
	for past := failed.CreatedAt.Add(ttl + 3*time.Second); time.Now().Before(past); time.Sleep(250 * time.Millisecond) {
		_, err := gwConn.Res.Jobs.Get(context.Background(), key)
		require.NoError(t, err, "the failed job's record outlives its admission's retention")
	}
	replay()
	require.Len(t, jobtest.Events(t, gwConn.Res, rec), 2, "no other event")
}
