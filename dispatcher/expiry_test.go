package dispatcher

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/jobtest"
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
	d, err := New(testConfig(), env.Connect(t, "dispatcher").Res, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(d.Stop)

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
