package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks no test leaves goroutines behind (Wait's streams, retry
// timers, journal handles). Idle keep-alive connections of the shared HTTP
// transport are not leaks, nor are fasthttp's process-wide helpers behind
// the gateway (a worker-pool cleaner that sleeps 10s, the date updater).
// Nor is nats.go's own: its object store's Put (the harness stores
// results) starts a reconnect watcher and clears the channel it watches
// when the put ends; a put that ends before the watcher first runs leaves
// it waiting on a nil channel (nats.go v1.55.0 jetstream/object.go and
// publish.go; docs/performance.md, "Other findings").
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
	)
}
