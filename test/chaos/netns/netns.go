package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// prefix starts every namespace and link name this package creates, so
// Setup can find what a dead run left behind and nothing else.
const prefix = "jgc"

// table is the nftables table holding a namespace's fault rules.
const table = "jgchaos"

// Net is one run's namespaces, bridge and links.
type Net struct {
	id     string // the creating process's pid: names stay unique per run
	nodes  int
	subnet string // "10.213.X"
	mu     sync.Mutex
	closed bool
}

// Available reports why namespaces cannot be used here (not root, a
// missing command), or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	for _, c := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("%s not found (apt-get install iproute2 nftables): %w", c, err)
		}
	}
	return nil
}

// Setup creates n namespaces joined by a bridge, after removing what dead
// runs left. On an error it removes what it created.
func Setup(ctx context.Context, n int) (*Net, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	CleanStale(ctx)
	pid := os.Getpid()
	net := &Net{id: strconv.Itoa(pid), nodes: n, subnet: fmt.Sprintf("10.213.%d", pid%250+1)}
	if err := net.create(ctx); err != nil {
		_ = net.Close()
		return nil, err
	}
	return net, nil
}

func (n *Net) bridge() string        { return prefix + n.id + "br" }
func (n *Net) hostLink(i int) string { return fmt.Sprintf("%s%sv%d", prefix, n.id, i+1) }

// Name is node i's namespace (0-based).
func (n *Net) Name(i int) string { return fmt.Sprintf("%s-%s-n%d", prefix, n.id, i+1) }

// IP is node i's address, reachable from the host and the other nodes.
func (n *Net) IP(i int) string { return fmt.Sprintf("%s.%d", n.subnet, 11+i) }

// HostIP is the host's address on the bridge.
func (n *Net) HostIP() string { return n.subnet + ".1" }

// Nodes is the number of namespaces.
func (n *Net) Nodes() int { return n.nodes }

// Exec returns the argv prefix that runs a command in node i's namespace.
// `ip netns exec` execs the command in place, so its pid is the command's:
// signals sent to it reach the command itself.
func (n *Net) Exec(i int) []string { return []string{"ip", "netns", "exec", n.Name(i)} }

func (n *Net) create(ctx context.Context) error {
	cmds := [][]string{
		{"ip", "link", "add", n.bridge(), "type", "bridge"},
		{"ip", "addr", "add", n.HostIP() + "/24", "dev", n.bridge()},
		{"ip", "link", "set", n.bridge(), "up"},
	}
	for i := range n.nodes {
		ns := n.Name(i)
		cmds = append(cmds,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			[]string{"ip", "link", "add", n.hostLink(i), "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "link", "set", n.hostLink(i), "master", n.bridge(), "up"},
			[]string{"ip", "-n", ns, "addr", "add", n.IP(i) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, c := range cmds {
		if err := run(ctx, nil, c...); err != nil {
			return err
		}
	}
	return n.Heal(ctx)
}

// Partition cuts the nodes into groups: every node drops the packets from
// and to the nodes of the other groups. The host reaches every node.
// A node in no group is cut from every other node.
func (n *Net) Partition(ctx context.Context, groups ...[]int) error {
	group := make([]int, n.nodes)
	for i := range group {
		group[i] = -1 - i // alone unless named
	}
	for g, members := range groups {
		for _, i := range members {
			group[i] = g
		}
	}
	return n.apply(ctx, func(i, j int) bool { return group[i] != group[j] }, nil)
}

// Cut drops the packets between nodes a and b only: both still reach the
// third and the host (a partition that is not transitive).
func (n *Net) Cut(ctx context.Context, a, b int) error {
	return n.apply(ctx, func(i, j int) bool { return i == a && j == b || i == b && j == a }, nil)
}

// Isolate cuts node i from every other node and from the host: only the
// processes in its own namespace reach it.
func (n *Net) Isolate(ctx context.Context, i int) error {
	return n.apply(ctx, func(x, y int) bool { return x == i || y == i }, map[int]bool{i: true})
}

// Heal removes every rule: all nodes and the host reach each other again.
func (n *Net) Heal(ctx context.Context) error {
	return n.apply(ctx, func(int, int) bool { return false }, nil)
}

// apply replaces each namespace's rules: node i drops the packets from and
// to node j where cut(i, j), and from and to the host where hostCut[i].
// The table is deleted and written again in one nft transaction per
// namespace, so a namespace never runs without the rules it should have
// longer than that call.
func (n *Net) apply(ctx context.Context, cut func(i, j int) bool, hostCut map[int]bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("netns: closed")
	}
	for i := range n.nodes {
		var drop []string
		for j := range n.nodes {
			if j != i && cut(i, j) {
				drop = append(drop, n.IP(j))
			}
		}
		if hostCut[i] {
			drop = append(drop, n.HostIP())
		}
		var script strings.Builder
		// "add" then "delete" empties the table whether or not it existed.
		fmt.Fprintf(&script, "add table inet %s\ndelete table inet %s\n", table, table)
		if len(drop) > 0 {
			set := strings.Join(drop, ", ")
			fmt.Fprintf(&script, "table inet %s {\n", table)
			fmt.Fprintf(&script, "  chain in { type filter hook input priority 0; policy accept; ip saddr { %s } drop; }\n", set)
			fmt.Fprintf(&script, "  chain out { type filter hook output priority 0; policy accept; ip daddr { %s } drop; }\n", set)
			script.WriteString("}\n")
		}
		if err := run(ctx, strings.NewReader(script.String()), "ip", "netns", "exec", n.Name(i), "nft", "-f", "-"); err != nil {
			return err
		}
	}
	return nil
}

// Close removes the namespaces (which takes their veth ends and rules with
// them) and the bridge. It is safe to call twice.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	// Not the caller's context: an interrupted run must still clean up.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for i := range n.nodes {
		if exists(ctx, "netns", n.Name(i)) {
			errs = append(errs, run(ctx, nil, "ip", "netns", "del", n.Name(i)))
		}
		if exists(ctx, "link", n.hostLink(i)) {
			errs = append(errs, run(ctx, nil, "ip", "link", "del", n.hostLink(i)))
		}
	}
	if exists(ctx, "link", n.bridge()) {
		errs = append(errs, run(ctx, nil, "ip", "link", "del", n.bridge()))
	}
	return errors.Join(errs...)
}

// exists reports whether `ip <what> show` lists name.
func exists(ctx context.Context, what, name string) bool {
	args := []string{what, "show", name}
	if what == "netns" {
		args = []string{"netns", "list"}
	}
	out, err := exec.CommandContext(ctx, "ip", args...).Output()
	if err != nil {
		return false
	}
	if what != "netns" {
		return true
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

// CleanStale removes the namespaces and links of runs whose process is
// gone.
func CleanStale(ctx context.Context) {
	dead := func(name string) bool {
		rest := strings.TrimPrefix(strings.TrimPrefix(name, prefix), "-")
		end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if end <= 0 {
			return false
		}
		pid := rest[:end]
		_, err := os.Stat("/proc/" + pid)
		return errors.Is(err, os.ErrNotExist)
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], prefix+"-") && dead(f[0]) {
				_ = run(ctx, nil, "ip", "netns", "del", f[0])
			}
		}
	}
	if out, err := exec.CommandContext(ctx, "ip", "-o", "link", "show").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if strings.HasPrefix(name, prefix) && dead(name) {
				_ = run(ctx, nil, "ip", "link", "del", name)
			}
		}
	}
}

func run(ctx context.Context, stdin *strings.Reader, args ...string) error {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
