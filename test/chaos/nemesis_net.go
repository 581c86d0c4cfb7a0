package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// netCutter is the network of a partition run (netns.Net).
type netCutter interface {
	Partition(ctx context.Context, groups ...[]int) error
	Cut(ctx context.Context, a, b int) error
	Isolate(ctx context.Context, i int) error
	Heal(ctx context.Context) error
}

// cutNet applies one net fault, holds it, and heals the network. Heal runs
// on its own context: an interrupted run still leaves a whole network
// behind for the final reads (and then removes it).
func (n *nemesis) cutNet(ctx context.Context, i, lane int, f fault) {
	node := func(x int) string { return fmt.Sprintf("n%d", x+1) }
	others := func(x int) (int, int) { return (x + 1) % 3, (x + 2) % 3 }
	var desc string
	var err error
	switch f.action {
	case actPartition:
		a, b := others(f.target)
		desc = fmt.Sprintf("%s | %s %s (clients reach all)", node(f.target), node(a), node(b))
		err = n.net.Partition(ctx, []int{f.target}, []int{a, b})
	case actIsolateLeader:
		l := -1
		if n.leader != nil {
			l = n.leader(ctx)
		}
		how := "leader of the job records"
		if l < 0 {
			l, how = f.target, "leader unknown, a random node"
		}
		a, b := others(l)
		desc = fmt.Sprintf("%s (%s) | %s %s, host", node(l), how, node(a), node(b))
		err = n.net.Isolate(ctx, l)
	case actCut:
		desc = fmt.Sprintf("%s -x- %s (both reach %s)", node(f.target), node(f.other), node(3-f.target-f.other))
		err = n.net.Cut(ctx, f.target, f.other)
	}
	note := fmt.Sprintf("fault %d (lane %d), hold %s: %s", i, lane, f.hold.Round(time.Millisecond), desc)
	e := Entry{Kind: "fault", Target: "net", Action: f.action, Note: note}
	if err != nil {
		e.Err = err.Error()
	}
	n.h.Add(e)
	if err == nil {
		n.stats.add(f.action, "net")
		n.log("fault %d: %s %s for %s", i, f.action, desc, f.hold.Round(time.Millisecond))
		sleepCtx(ctx, f.hold)
	}
	hctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e = Entry{Kind: "fault", Target: "net", Action: "heal", Note: fmt.Sprintf("fault %d", i)}
	if err := n.net.Heal(hctx); err != nil {
		e.Err = err.Error()
	}
	n.h.Add(e)
}

// jobsLeader is the index of the node leading the job records' stream, as
// the cluster tells (stream info through any node the observer reaches),
// or -1.
func jobsLeader(ctx context.Context, nc *nats.Conn) int {
	js, err := jetstream.New(nc)
	if err != nil {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "KV_"+natsjs.BucketJobs)
	if err != nil {
		return -1
	}
	info := s.CachedInfo()
	if info.Cluster == nil {
		return -1
	}
	var n int
	if _, err := fmt.Sscanf(info.Cluster.Leader, "n%d", &n); err != nil || n < 1 || n > 3 {
		return -1
	}
	return n - 1
}
