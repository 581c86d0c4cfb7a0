// Command chaos runs jobgate's randomized fault test (package
// test/chaos) for as long as asked and prints its report; it exits 1
// when the checker found anomalies. `make chaos` runs it.
//
//	go run ./test/chaos/cmd/chaos --duration 10m --seed 42
//	go run ./test/chaos/cmd/chaos --check /tmp/jobgate-chaos-.../history.jsonl
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jobgate/jobgate/test/chaos"
)

func main() {
	var o chaos.Options
	flag.Uint64Var(&o.Seed, "seed", 0, "seed of the fault and request schedule (0: pick one from the clock)")
	flag.DurationVar(&o.Duration, "duration", 10*time.Minute, "how long faults are injected")
	flag.DurationVar(&o.Bound, "bound", 2*time.Minute, "after the faults stop, every job must be terminal within this")
	flag.IntVar(&o.Clients, "clients", 6, "submitting clients")
	flag.DurationVar(&o.Think, "think", 400*time.Millisecond, "mean pause between a client's submissions")
	flag.DurationVar(&o.FaultGap, "fault-gap", 3*time.Second, "mean quiet time between faults")
	flag.DurationVar(&o.FaultHold, "fault-hold", 3*time.Second, "mean time a process stays killed or paused")
	flag.IntVar(&o.Lanes, "lanes", 2, "fault lanes running at once (only the first touches NATS nodes)")
	flag.IntVar(&o.LongPausePct, "long-pauses", 20, "percent of pauses that last 16-40s, past lease and ack-wait limits (-1: none)")
	flag.IntVar(&o.BatchPct, "batches", 25, "percent of new submissions that are batches of 2-5 jobs, notified as one or each (-1: none)")
	flag.IntVar(&o.ScheduledPct, "scheduled", 10, "percent of jobs submitted with a delay of 2-6 s, admitted scheduled (-1: none)")
	flag.IntVar(&o.FlowPct, "flow", 15, "percent of jobs of the flow-limited type chaos_export, worked by the harness: one per customer at once, 2 starts/s (-1: none)")
	flag.BoolVar(&o.SyncAlways, "sync-always", false, "NATS nodes fsync every write (sync_interval: always)")
	flag.BoolVar(&o.Partitions, "partitions", false, "each NATS node in a network namespace of its own, and network faults (root; make chaos-partitions)")
	flag.IntVar(&o.NetPct, "net-faults", 0, "percent of the first lane's faults that cut the network (with --partitions; default 40, -1: none)")
	flag.IntVar(&o.PowerLossPct, "power-loss", 0, "percent of the first lane's faults that kill a NATS node and drop its unsynced tail (default 10 with --partitions, else none; -1: none)")
	flag.BoolVar(&o.Race, "race", false, "build jobgate with the race detector")
	flag.StringVar(&o.WorkDir, "work-dir", "", "where binaries, logs, stores and the history go (default: a new temp dir)")
	flag.BoolVar(&o.Keep, "keep", false, "keep the NATS stores and binaries of a clean run (a run with anomalies keeps them anyway)")
	flag.BoolVar(&o.Strict, "strict", false, "known issues (chaos.KnownIssues) count as anomalies too")
	jobgateBin := flag.String("jobgate", "", "use this jobgate binary instead of building ./cmd/jobgate")
	natsBin := flag.String("nats-server", "", "use this nats-server binary instead of building the version go.mod pins")
	check := flag.String("check", "", "only check this history file (with --bound) and print the report")
	flag.Parse()

	if *check != "" {
		entries, err := chaos.ReadHistory(*check)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		rep := chaos.Check(entries, o.Bound, o.Strict)
		fmt.Print(rep)
		fmt.Printf("%d anomalies\n", len(rep.Anomalies))
		if len(rep.Anomalies) > 0 {
			os.Exit(1)
		}
		return
	}
	if *jobgateBin != "" || *natsBin != "" {
		if *jobgateBin == "" || *natsBin == "" {
			fmt.Fprintln(os.Stderr, "--jobgate and --nats-server go together")
			os.Exit(2)
		}
		o.Binaries = &chaos.Binaries{Jobgate: *jobgateBin, NATSServer: *natsBin}
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano() % 1_000_000_000)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, hist, err := chaos.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos (seed %d): %v\nhistory: %s\n", o.Seed, err, hist)
		os.Exit(2)
	}
	fmt.Print(rep)
	fmt.Printf("history: %s\n", hist)
	// Last, for whoever reads only the end of the output.
	fmt.Printf("%d anomalies\n", len(rep.Anomalies))
	if len(rep.Anomalies) > 0 {
		os.Exit(1)
	}
}
