package worker_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// A declaration refused throttled with a wait (a credential past its
// limit of changes) is asked again after that wait, not sooner, and
// Start then succeeds.
func TestADeclarationThrottledWithAWaitIsAskedAgainAfterIt(t *testing.T) {
	t.Parallel()
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	broker, err := emb.Connect("fake-broker")
	require.NoError(t, err)
	t.Cleanup(broker.Close)
	const wait = 700 * time.Millisecond
	var mu sync.Mutex
	var declares []time.Time
	_, err = broker.Subscribe(wire.Root+"*.*.*", func(m *nats.Msg) {
		var reply wire.Reply
		switch _, _, op, _, _ := wire.Parse(m.Subject); op {
		case wire.OpDeclare:
			mu.Lock()
			declares = append(declares, time.Now())
			if len(declares) == 1 {
				reply.Error = &wire.Error{Code: wire.CodeThrottled, Message: "too often", RetryAfterMS: wait.Milliseconds()}
			}
			mu.Unlock()
		case wire.OpNext:
			var req wire.NextRequest
			_ = json.Unmarshal(m.Data, &req)
			time.Sleep(min(time.Duration(req.WaitMS)*time.Millisecond, 50*time.Millisecond)) // no work
		}
		data, _ := json.Marshal(&reply)
		_ = m.Respond(data)
	})
	require.NoError(t, err)
	require.NoError(t, broker.Flush())
	nc, err := emb.Connect("worker")
	require.NoError(t, err)
	t.Cleanup(nc.Close)

	took, err := startWith(t, worker.Config{Conn: nc, Credential: "cccccccccccccccc"}, "export")
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, declares, 2)
	require.GreaterOrEqual(t, declares[1].Sub(declares[0]), wait, "asked again before the wait")
	require.GreaterOrEqual(t, took, wait)
}
