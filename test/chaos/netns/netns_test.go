package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The test binary doubles as the processes run inside the namespaces:
// with NETNS_LISTEN it accepts connections, with NETNS_DIAL it exits 0 when
// a connection succeeds within 300 ms.
func TestMain(m *testing.M) {
	if addr := os.Getenv("NETNS_LISTEN"); addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(2)
			}
			_ = c.Close()
		}
	}
	if addr := os.Getenv("NETNS_DIAL"); addr != "" {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			os.Exit(1)
		}
		_ = c.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestPartitionsCutWhatTheySay builds three namespaces and checks, with
// real TCP connections, who reaches whom in each fault, and that Close
// leaves nothing behind.
func TestPartitionsCutWhatTheySay(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := Setup(ctx, 3)
	require.NoError(t, err)
	defer func() { require.NoError(t, n.Close()) }()

	addr := func(i int) string { return n.IP(i) + ":7000" }
	for i := range 3 {
		cmd := exec.Command(n.Exec(i)[0], append(n.Exec(i)[1:], os.Args[0])...)
		cmd.Env = append(os.Environ(), "NETNS_LISTEN="+addr(i))
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	fromHost := func(i int) bool {
		c, err := net.DialTimeout("tcp", addr(i), 300*time.Millisecond)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}
	fromNode := func(i, j int) bool {
		cmd := exec.Command(n.Exec(i)[0], append(n.Exec(i)[1:], os.Args[0])...)
		cmd.Env = append(os.Environ(), "NETNS_DIAL="+addr(j))
		return cmd.Run() == nil
	}
	// The listeners take a moment to start.
	deadline := time.Now().Add(20 * time.Second)
	for i := range 3 {
		for !fromHost(i) {
			require.True(t, time.Now().Before(deadline), "node %d never listened", i)
			time.Sleep(50 * time.Millisecond)
		}
	}
	want := func(name string, host [3]bool, nodes [3][3]bool) {
		t.Helper()
		for i := range 3 {
			require.Equal(t, host[i], fromHost(i), "%s: host → node %d", name, i)
			for j := range 3 {
				if i != j {
					require.Equal(t, nodes[i][j], fromNode(i, j), "%s: node %d → node %d", name, i, j)
				}
			}
		}
	}
	all := [3][3]bool{{true, true, true}, {true, true, true}, {true, true, true}}
	want("healthy", [3]bool{true, true, true}, all)

	require.NoError(t, n.Partition(ctx, []int{0, 1}, []int{2}))
	want("2/1", [3]bool{true, true, true}, [3][3]bool{{true, true, false}, {true, true, false}, {false, false, true}})

	require.NoError(t, n.Isolate(ctx, 0))
	want("isolate 0", [3]bool{false, true, true}, [3][3]bool{{true, false, false}, {false, true, true}, {false, true, true}})

	require.NoError(t, n.Cut(ctx, 0, 1))
	want("cut 0-1", [3]bool{true, true, true}, [3][3]bool{{true, false, true}, {false, true, true}, {true, true, true}})

	require.NoError(t, n.Heal(ctx))
	want("healed", [3]bool{true, true, true}, all)

	require.NoError(t, n.Close())
	for i := range 3 {
		require.False(t, exists(ctx, "netns", n.Name(i)), "namespace %s left behind", n.Name(i))
		require.False(t, exists(ctx, "link", n.hostLink(i)), "link %s left behind", n.hostLink(i))
	}
	require.False(t, exists(ctx, "link", n.bridge()))
}
