package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// fault is one planned nemesis action.
type fault struct {
	after  time.Duration // gap before it
	target int           // index into the process list (a node's for net faults and power loss)
	other  int           // cut: the node cut from target
	action string        // kill, stop, powerloss, or a net fault: partition, isolate-leader, cut
	hold   time.Duration // down, paused or cut for
}

// Net faults (partition runs only), each healed after its hold.
const (
	actPartition     = "partition"      // a node cut from the other two (2/1); the host reaches all
	actIsolateLeader = "isolate-leader" // the jobs bucket's stream leader cut from the nodes and the host
	actCut           = "cut"            // two nodes cut from each other, both reach the third
	actPowerLoss     = "powerloss"      // a node killed, its store's unsynced tail dropped, started again
)

func isNetFault(action string) bool {
	return action == actPartition || action == actIsolateLeader || action == actCut
}

// plan draws one lane's fault schedule from the seed alone, so a seed
// replays the same faults at the same offsets (the timing of everything
// else differs). Targets are drawn from procs[first:].
func plan(seed uint64, lane, first, procs int, opts *Options) []fault {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65+uint64(lane)))
	var out []fault
	var at time.Duration
	for {
		gap := opts.FaultGap/2 + time.Duration(rng.Int64N(int64(opts.FaultGap)))
		hold := opts.FaultHold/4 + time.Duration(rng.Int64N(int64(opts.FaultHold)*3/2))
		f := fault{after: gap, target: first + rng.IntN(procs-first), action: "kill", hold: hold}
		at += gap
		// Lane 0 may cut the network or cut a node's power instead. The
		// extra draws are only made when asked for, so a seed of an
		// earlier run replays the same schedule.
		if lane == 0 && (opts.Partitions && opts.NetPct > 0 || opts.PowerLossPct > 0) {
			x := rng.IntN(100)
			netPct := 0
			if opts.Partitions {
				netPct = max(opts.NetPct, 0)
			}
			switch {
			case x < netPct:
				f.action = []string{actPartition, actIsolateLeader, actCut}[rng.IntN(3)]
				f.target = rng.IntN(3)
				f.other = (f.target + 1 + rng.IntN(2)) % 3
				// Past NATS's election timeouts, so leaders change on
				// both sides of the cut while it lasts.
				f.hold = 5*time.Second + time.Duration(rng.Int64N(int64(15*time.Second)))
				at += f.hold
				if at > opts.Duration {
					return out
				}
				out = append(out, f)
				continue
			case x < netPct+max(opts.PowerLossPct, 0):
				f.action = actPowerLoss
				f.target = rng.IntN(3)
				at += f.hold
				if at > opts.Duration {
					return out
				}
				out = append(out, f)
				continue
			}
		}
		long := rng.IntN(100) < opts.LongPausePct
		longHold := 16*time.Second + time.Duration(rng.Int64N(int64(24*time.Second)))
		if rng.IntN(2) == 0 {
			f.action = "stop"
			if long {
				// Past the renderers' stale-lease limit (15s) and often their
				// ack wait (30s): the work is handed to another process while
				// the frozen one wakes up believing it still holds it.
				f.hold = longHold
			}
		}
		at += f.hold
		if at > opts.Duration {
			return out
		}
		out = append(out, f)
	}
}

// faultStats counts the faults done, per action and kind of process.
type faultStats struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *faultStats) add(action, kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[action+" "+kind]++
}

func (s *faultStats) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.n {
		out[k] = v
	}
	return out
}

// nemesis runs the lanes' plans against the processes, each lane one
// fault at a time, lanes overlapping. Only lane 0 touches NATS nodes, so
// at most one node is ever down or paused: the R3 streams keep a quorum.
// Before it touches a node it waits until all three report healthy
// (JetStream current), else it picks a jobgate process instead. A process
// already under a fault of another lane is skipped for the next free one.
type nemesis struct {
	procs []*proc
	h     *History
	stats *faultStats
	log   func(format string, args ...any)
	// Partition runs: the network, and the node leading the job records'
	// stream (-1 when it cannot tell).
	net    netCutter
	leader func(ctx context.Context) int
	// dropUnsynced truncates a stopped node's store to what it had synced
	// (powerloss) and says what it dropped.
	dropUnsynced func(p *proc) (string, error)

	mu   sync.Mutex
	busy map[*proc]bool
	seq  int
}

func (n *nemesis) run(ctx context.Context, lanes [][]fault) {
	n.busy = map[*proc]bool{}
	var wg sync.WaitGroup
	for lane, faults := range lanes {
		wg.Go(func() { n.lane(ctx, lane, faults) })
	}
	wg.Wait()
}

func (n *nemesis) lane(ctx context.Context, lane int, faults []fault) {
	for _, f := range faults {
		if !sleepCtx(ctx, f.after) {
			return
		}
		if isNetFault(f.action) {
			if n.net == nil {
				continue
			}
			if !n.natsHealthy(ctx) {
				n.h.Add(Entry{Kind: "fault", Target: "net", Action: "skip", Note: "the NATS cluster is not healthy yet; no " + f.action})
				continue
			}
			n.mu.Lock()
			n.seq++
			i := n.seq
			n.mu.Unlock()
			n.cutNet(ctx, i, lane, f)
			continue
		}
		p := n.procs[f.target]
		if p.kind == KindNATS && !n.natsHealthy(ctx) {
			n.h.Add(Entry{Kind: "fault", Target: p.name, Action: "skip", Note: "the NATS cluster is not healthy yet; a jobgate process instead"})
			p = nil
		}
		n.mu.Lock()
		if p == nil || n.busy[p] {
			p = nil
			for j := 1; j <= len(n.procs); j++ {
				if q := n.procs[(f.target+j)%len(n.procs)]; q.kind != KindNATS && !n.busy[q] {
					p = q
					break
				}
			}
		}
		if p == nil {
			n.mu.Unlock()
			continue
		}
		if p.kind != KindNATS && f.action == actPowerLoss {
			f.action = "kill" // another process stood in for the node
		}
		n.busy[p] = true
		n.seq++
		i := n.seq
		n.mu.Unlock()
		n.inject(ctx, i, lane, p, f)
		n.mu.Lock()
		delete(n.busy, p)
		n.mu.Unlock()
	}
}

func (n *nemesis) natsHealthy(ctx context.Context) bool {
	for _, p := range n.procs {
		if p.kind == KindNATS {
			if err := p.waitHealthy(ctx, 20*time.Second); err != nil {
				return false
			}
		}
	}
	return true
}

func (n *nemesis) inject(ctx context.Context, i, lane int, p *proc, f fault) {
	note := fmt.Sprintf("fault %d (lane %d), hold %s", i, lane, f.hold.Round(time.Millisecond))
	switch f.action {
	case "kill":
		if err := p.kill(); err != nil {
			n.h.Add(Entry{Kind: "fault", Target: p.name, Action: "kill", Err: err.Error(), Note: note})
			return
		}
		n.h.Add(Entry{Kind: "fault", Target: p.name, Action: "kill", Note: note})
		n.stats.add("kill", p.kind)
		n.log("fault %d: kill %s for %s", i, p.name, f.hold.Round(time.Millisecond))
		sleepCtx(ctx, f.hold)
		n.restart(ctx, p)
	case actPowerLoss:
		if err := p.kill(); err != nil {
			n.h.Add(Entry{Kind: "fault", Target: p.name, Action: actPowerLoss, Err: err.Error(), Note: note})
			return
		}
		what, err := "", error(nil)
		if n.dropUnsynced != nil {
			what, err = n.dropUnsynced(p)
		}
		e := Entry{Kind: "fault", Target: p.name, Action: actPowerLoss, Note: note + "; " + what}
		if err != nil {
			e.Err = err.Error()
		}
		n.h.Add(e)
		n.stats.add("power loss", p.kind)
		n.log("fault %d: power loss of %s for %s: %s", i, p.name, f.hold.Round(time.Millisecond), what)
		sleepCtx(ctx, f.hold)
		n.restart(ctx, p)
	case "stop":
		if err := p.signal(syscall.SIGSTOP); err != nil {
			n.h.Add(Entry{Kind: "fault", Target: p.name, Action: "stop", Err: err.Error(), Note: note})
			return
		}
		n.h.Add(Entry{Kind: "fault", Target: p.name, Action: "stop", Note: note})
		n.stats.add("pause", p.kind)
		n.log("fault %d: pause %s for %s", i, p.name, f.hold.Round(time.Millisecond))
		sleepCtx(ctx, f.hold)
		err := p.signal(syscall.SIGCONT)
		e := Entry{Kind: "fault", Target: p.name, Action: "cont"}
		if err != nil {
			e.Err = err.Error()
		}
		n.h.Add(e)
	}
}

// restart starts p again (also after an exit nobody asked for) and waits
// until it is ready, where it can tell.
func (n *nemesis) restart(ctx context.Context, p *proc) {
	e := Entry{Kind: "fault", Target: p.name, Action: "restart"}
	// A start that fails is retried: a process left down would stall the
	// run and fail it for the wrong reason. (One that starts and then exits
	// by itself is the supervisor's: an anomaly, and restarted there.)
	var err error
	for try := 1; try <= 5; try++ {
		if err = p.start(); err == nil || ctx.Err() != nil {
			break
		}
		e.Note = fmt.Sprintf("start try %d: %v", try, err)
		sleepCtx(ctx, time.Second)
	}
	if err == nil {
		err = p.waitHealthy(ctx, 60*time.Second)
	}
	if err != nil {
		e.Err = err.Error()
	}
	n.h.Add(e)
}
