package clustertest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// ClusterName is the route cluster name every node shares.
const ClusterName = "jobgate-test"

// Cluster is n nats-server nodes with JetStream, routed to each other on
// loopback. Nodes keep their ports and store directories across Stop and
// Restart, as a real server restarted on its host would.
type Cluster struct {
	t     testing.TB
	nodes []*Node
}

// Node is one server of the cluster.
type Node struct {
	Name       string
	ClientPort int
	RoutePort  int
	StoreDir   string
	routes     string
	configure  []func(*server.Options)

	mu  sync.Mutex
	srv *server.Server
}

// Start runs an n-node cluster that lives as long as the test. configure,
// if given, adjusts every node's server options (e.g. SyncAlways).
func Start(t testing.TB, n int, configure ...func(*server.Options)) *Cluster {
	t.Helper()
	ports := freePorts(t, 2*n)
	c := &Cluster{t: t}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i]))
	}
	for i := range n {
		c.nodes = append(c.nodes, &Node{
			Name:       fmt.Sprintf("n%d", i+1),
			ClientPort: ports[i],
			RoutePort:  ports[n+i],
			StoreDir:   t.TempDir(),
			routes:     strings.Join(routes, ","),
			configure:  configure,
		})
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.stop()
		}
	})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, nd := range c.nodes {
		wg.Go(func() { errs[i] = nd.start() })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	c.waitMeta()
	return c
}

// waitMeta polls until the JetStream meta layer has a leader and every
// running node is current with it, so that the first API requests are
// answered instead of waiting out their timeout.
func (c *Cluster) waitMeta() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, current := false, true
		for _, nd := range c.nodes {
			nd.mu.Lock()
			if s := nd.srv; s != nil {
				leader = leader || s.JetStreamIsLeader()
				current = current && s.JetStreamIsCurrent()
			}
			nd.mu.Unlock()
		}
		if leader && current {
			return
		}
		if time.Now().After(deadline) {
			require.FailNow(c.t, "JetStream cluster not ready", "meta leader %v, all current %v after 30s", leader, current)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// options are a node's server settings; a fresh copy per start, because the
// server keeps and changes the one it is given.
func (nd *Node) options() *server.Options {
	o := &server.Options{
		ServerName: nd.Name,
		Host:       "127.0.0.1",
		Port:       nd.ClientPort,
		Cluster: server.ClusterOpts{
			Name: ClusterName,
			Host: "127.0.0.1",
			Port: nd.RoutePort,
		},
		Routes:             server.RoutesFromStr(nd.routes),
		JetStream:          true,
		StoreDir:           nd.StoreDir,
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  24 << 30, // holds the default layout's byte budgets
		MaxPayload:         8 << 20,
		NoSigs:             true,
		NoLog:              true,
	}
	for _, f := range nd.configure {
		f(o)
	}
	return o
}

func (nd *Node) start() error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.srv != nil {
		return fmt.Errorf("node %s already running", nd.Name)
	}
	s, err := server.NewServer(nd.options())
	if err != nil {
		return fmt.Errorf("node %s: %w", nd.Name, err)
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("node %s: not ready for connections within 20s", nd.Name)
	}
	nd.srv = s
	return nil
}

func (nd *Node) stop() {
	nd.mu.Lock()
	s := nd.srv
	nd.srv = nil
	nd.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Running reports whether the node's server is up.
func (nd *Node) Running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.srv != nil
}

// URL is the node's client URL.
func (nd *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", nd.ClientPort) }

// Nodes lists the cluster's nodes.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns node i (0-based).
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// URLs is every client URL, comma-separated (the --nats form).
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		urls[i] = nd.URL()
	}
	return strings.Join(urls, ",")
}

// Stop shuts node i down (its store stays).
func (c *Cluster) Stop(i int) { c.nodes[i].stop() }

// Restart starts node i again on its ports and store.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	require.NoError(c.t, c.nodes[i].start())
	c.waitMeta()
}

// Index returns the index of the node called name, or -1.
func (c *Cluster) Index(name string) int {
	for i, nd := range c.nodes {
		if nd.Name == name {
			return i
		}
	}
	return -1
}

// Connect opens a client connection the way a jobgate process does
// (natsjs.Connect: reconnects forever), to url (a node's URL or a list),
// closed when the test ends.
func (c *Cluster) Connect(name, url string) *nats.Conn {
	c.t.Helper()
	nc, err := natsjs.Connect(natsjs.ConnectConfig{URL: url, Name: name})
	require.NoError(c.t, err)
	c.t.Cleanup(nc.Close)
	return nc
}

// Provision connects to url and provisions layout there, retrying while
// the cluster is still forming (no meta leader, peers not yet known), as
// jobgate's runtime does at start.
func (c *Cluster) Provision(name, url string, layout natsjs.Layout) (*nats.Conn, *natsjs.Resources) {
	c.t.Helper()
	nc := c.Connect(name, url)
	js, err := jetstream.New(nc)
	require.NoError(c.t, err)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := natsjs.Provision(ctx, js, layout)
		cancel()
		if err == nil {
			return nc, res
		}
		if !natsjs.Unavailable(err) || time.Now().After(deadline) {
			require.NoError(c.t, err, "provision on the cluster")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Leader returns the index of the node leading stream, polling until the
// stream has one.
func (c *Cluster) Leader(js jetstream.JetStream, stream string) int {
	c.t.Helper()
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := js.Stream(ctx, stream)
		cancel()
		if err != nil {
			last = err
			continue
		}
		if ci := s.CachedInfo().Cluster; ci != nil && ci.Leader != "" {
			if i := c.Index(ci.Leader); i >= 0 {
				return i
			}
		}
	}
	require.FailNow(c.t, "stream has no leader", "%s: %v", stream, last)
	return -1
}

// WaitCurrent polls until stream has a leader and every replica is current
// (the restarted node caught up).
func (c *Cluster) WaitCurrent(js jetstream.JetStream, stream string, timeout time.Duration) {
	c.t.Helper()
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := js.Stream(ctx, stream)
		cancel()
		if err != nil {
			last = err.Error()
			continue
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			last = "no leader"
			continue
		}
		ok := len(ci.Replicas) == len(c.nodes)-1
		for _, r := range ci.Replicas {
			ok = ok && r.Current && !r.Offline
		}
		if ok {
			return
		}
		last = fmt.Sprintf("leader %s, replicas %+v", ci.Leader, ci.Replicas)
	}
	require.FailNow(c.t, "stream replicas not current", "%s after %s: %s", stream, timeout, last)
}

// freePorts reserves n distinct loopback ports. They are released before
// the servers bind them, so another process could take one in between; on
// a test machine that is rare enough.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}
