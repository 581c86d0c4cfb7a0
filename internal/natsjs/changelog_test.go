package natsjs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// startJetStream starts an embedded JetStream server (internal/natsserver
// imports this package) and connects to it in process.
func startJetStream(t *testing.T) (*server.Server, jetstream.JetStream) {
	t.Helper()
	srv, err := server.NewServer(&server.Options{JetStream: true, StoreDir: t.TempDir(), Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	require.True(t, srv.ReadyForConnections(10*time.Second))
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return srv, js
}

// A change-log pull that the server dropped without a word is noticed
// within two of the relay's heartbeats (the client's default, half the
// pull's expiry, left every change waiting 5 s: seen under load), and the
// pull asked again gets the changes. The server drops a pull request with
// a heartbeat in silence when its queue of waiting requests is full, here
// with another client's request.
func TestAChangePullTheServerDroppedIsAskedAgain(t *testing.T) {
	t.Parallel()
	srv, js := startJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CHANGES", Subjects: []string{"changes.>"}})
	require.NoError(t, err)
	cons, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "relay", AckPolicy: jetstream.AckExplicitPolicy, MaxWaiting: 1})
	require.NoError(t, err)

	other, err := nats.Connect("", nats.InProcessServer(srv))
	require.NoError(t, err)
	defer other.Close()
	inbox := nats.NewInbox()
	_, err = other.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, other.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.CHANGES.relay", inbox, []byte(`{"batch":1,"expires":60000000000}`)))
	require.Eventually(t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumWaiting == 1
	}, 10*time.Second, 10*time.Millisecond, "the other client's pull waits")

	iter, err := cons.Messages(changePull(10)...)
	require.NoError(t, err)
	l := &ChangeLog{cons: cons, iter: iter}
	defer l.Stop()
	began := time.Now()
	_, err = l.Next()
	require.ErrorIs(t, err, ErrPullSilent)
	require.Less(t, time.Since(began), 4*time.Second, "noticed within two heartbeats (%s)", relayPullHeartbeat)

	other.Close()
	_, err = js.Publish(ctx, "changes.1", []byte("a change"))
	require.NoError(t, err)
	for deadline := time.Now().Add(15 * time.Second); ; {
		c, err := l.Next()
		if err == nil {
			require.Equal(t, "changes.1", c.Subject())
			require.NoError(t, c.Ack())
			return
		}
		require.True(t, errors.Is(err, ErrPullSilent), "only silence until the queue has room: %v", err)
		require.True(t, time.Now().Before(deadline), "the change never came")
	}
}
