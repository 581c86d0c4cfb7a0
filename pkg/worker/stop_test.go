package worker_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/stretchr/testify/require"
)

func greeter(t *testing.T, cfg worker.Config) *worker.Workers {
	t.Helper()
	w, err := worker.New(cfg)
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[none]{Name: "export_sales", Schema: closed,
		Work: func(context.Context, *worker.Job[none]) error { return nil }}))
	return w
}

// Stop before Start, and a second Stop, do nothing and say so with nil;
// a stopped Workers does not start.
func TestStopBeforeStartAndTwice(t *testing.T) {
	t.Parallel()
	w := greeter(t, worker.Config{URL: "nats://127.0.0.1:1"})
	require.NoError(t, w.Stop(context.Background()))
	require.NoError(t, w.Stop(context.Background()))
	require.Error(t, w.Start(context.Background()))
}

// A Stop during a Start that waits for a NATS server that does not answer
// (its TCP port accepts, its handshake never comes) returns at once, and
// so does Start, with an error: Stop does not wait behind the start-up.
func TestStopDuringAStartWaitingForNATS(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	t.Cleanup(func() {
		for {
			select {
			case c := <-accepted:
				_ = c.Close()
			default:
				return
			}
		}
	})
	w := greeter(t, worker.Config{URL: "nats://" + ln.Addr().String(), ConnectTimeout: time.Minute})
	startErr := make(chan error, 1)
	go func() { startErr <- w.Start(context.Background()) }()
	select {
	case c := <-accepted:
		accepted <- c
	case <-time.After(10 * time.Second):
		t.Fatal("Start never dialled the server")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	require.NoError(t, w.Stop(ctx))
	require.Less(t, time.Since(began), 2*time.Second, "Stop waited behind the start-up")
	select {
	case err := <-startErr:
		require.Error(t, err)
		require.Less(t, time.Since(began), 2*time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("Start still waits for NATS after Stop")
	}
}
