package conformance

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A cut proxy holds a bounded number of bytes, then reads no more (as a
// TCP window would): a worker that keeps writing while cut blocks instead
// of growing the runner's memory without end.
func TestACutPartitionHoldsBoundedBytes(t *testing.T) {
	t.Parallel()
	target, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = target.Close() })
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	p := newPartition(t, "nats://"+target.Addr().String())
	p.cut()
	c, err := net.Dial("tcp", p.ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, 4*maxHeld))
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("a write of %d bytes through a cut proxy completed (%v)", 4*maxHeld, err)
	case <-time.After(2 * time.Second):
	}
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	require.LessOrEqual(t, held, maxHeld+64<<10, "bytes held while cut")
	require.Positive(t, held)
}
