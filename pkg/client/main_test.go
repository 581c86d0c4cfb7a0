package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks no test leaves goroutines behind (Wait's streams, retry
// timers, journal handles). Idle keep-alive connections of the shared HTTP
// transport are not leaks, nor are fasthttp's process-wide helpers behind
// the gateway (a worker-pool cleaner that sleeps 10s, the date updater).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	)
}
