//go:build bench

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/internal/bench"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/renderer"
	"github.com/jobgate/jobgate/system"
	"github.com/nats-io/nats.go"
)

// runBench is `jobgate bench`: it starts the system under test as a second
// process of this same binary (`bench --target`, wired exactly like serve),
// drives it, prints one table and writes bench.json. See docs/performance.md.
func (m *Main) runBench(ctx context.Context, args []string) error {
	fs := newFlagSet("bench", m)
	out := fs.String("out", "bench.json", "where to write the JSON report")
	o := bench.Options{}
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "duration of each throughput figure")
	fs.IntVar(&o.Clients, "clients", 32, "concurrent HTTP clients")
	fs.StringVar(&o.Fsync, "fsync", "both", "durability settings to measure: both, default or always")
	sections := fs.String("sections", strings.Join(bench.AllSections, ","), "comma-separated sections to run (add "+bench.SecLevers+" to measure GOGC and log-level levers)")
	fs.IntVar(&o.E2EJobs, "e2e-jobs", 100, "1-page reports timed end to end")
	fs.IntVar(&o.RenderJobs, "render-jobs", 150, "63-page reports per renderer count")
	fs.IntVar(&o.FairJobs, "fair-jobs", 1000, "tenant A's backlog of 63-page reports in the fairness section")
	fs.IntVar(&o.Watchers, "watchers", 83, "reviewers watching their own job")
	fs.DurationVar(&o.WatchWindow, "watch-window", 60*time.Second, "how long each watching mode runs")
	fs.DurationVar(&o.ChangeInterval, "change-interval", 10*time.Second, "how often each watched job changes")
	fs.IntVar(&o.SSEStreams, "sse-streams", 1000, "event streams held open for the footprint")
	fs.IntVar(&o.FootprintJobs, "footprint-jobs", 100_000, "jobs admitted before the last memory reading")
	fs.IntVar(&o.FlowScheduled, "flow-scheduled", 100_000, "jobs scheduled an hour ahead while the flow section measures lateness and memory")
	fs.Float64Var(&o.FlowRate, "flow-rate", 600, "jobs a second the flow section's paced pipeline offers each target (below both targets' capacity)")
	fs.StringVar(&o.URL, "url", "", "benchmark a running gateway instead of starting one (needs its auth secret)")
	secret := fs.String("auth-secret", "", "with --url: the gateway's token secret (default JOBGATE_AUTH_SECRET)")
	fs.StringVar(&o.WorkDir, "work-dir", "", "where targets keep their data (default: a temp dir, removed)")
	fs.StringVar(&o.AsynqBench, "asynq-bench", "", "the nethttp section's Asynq enqueuer (tools/asynqbench; default: asynqbench beside this binary, else on PATH)")
	fs.StringVar(&o.ProfileDir, "profile-dir", "", "write a CPU profile of the target per figure into this dir")
	// The target process (internal: started by the bench itself).
	target := fs.Bool("target", false, "internal: run as the measured process, controlled over stdin/stdout")
	dataDir := fs.String("data-dir", "", "internal (--target): data dir")
	components := fs.String("components", "gateway", "internal (--target): components to run")
	syncAlways := fs.Bool("sync-always", false, "internal (--target): fsync every write")
	renderers := fs.Int("renderers", 0, "internal (--target): renderer concurrency")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *target {
		return m.runBenchTarget(ctx, *dataDir, strings.Split(*components, ","), *syncAlways, *renderers)
	}
	o.Sections = strings.Split(*sections, ",")
	if o.AsynqBench == "" {
		if exe, err := os.Executable(); err == nil {
			if p := filepath.Join(filepath.Dir(exe), "asynqbench"); func() error { _, err := os.Stat(p); return err }() == nil {
				o.AsynqBench = p
			}
		}
	}
	o.Log = m.Stderr
	if o.URL != "" {
		s := *secret
		if s == "" {
			s = m.Getenv("JOBGATE_AUTH_SECRET")
		}
		o.AuthSecret = []byte(s)
	} else {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.Launch = func(spec bench.TargetSpec) *exec.Cmd {
			cmd := exec.Command(exe, "bench", "--target", "--data-dir", spec.DataDir,
				"--components", strings.Join(spec.Components, ","), "--sync-always="+strconv.FormatBool(spec.SyncAlways),
				"--renderers", strconv.Itoa(spec.RendererConcurrency))
			cmd.Env = append(append(os.Environ(), "JOBGATE_AUTH_SECRET="+spec.AuthSecret), spec.Env...)
			if g := m.Getenv("JOBGATE_BENCH_TARGET_GODEBUG"); g != "" {
				// e.g. gctrace=1 for the target alone (docs/performance.md)
				cmd.Env = append(cmd.Env, "GODEBUG="+g)
			}
			cmd.Stderr = m.Stderr
			return cmd
		}
	}
	rep, err := bench.Run(ctx, o)
	if rep != nil {
		if werr := rep.WriteTable(m.Stdout); werr != nil {
			return werr
		}
		if werr := rep.WriteJSON(*out); werr != nil {
			return werr
		}
		fmt.Fprintf(m.Stderr, "bench: wrote %s\n", *out)
	}
	return err
}

// runBenchTarget is the measured process: the named components wired like
// `serve` on an embedded server in dataDir, plus the bench's control loop on
// stdin/stdout. Rate limits are lifted (the bench is one tenant's flood);
// logs go to dataDir/jobgate.log at the default level, as serve would log.
func (m *Main) runBenchTarget(ctx context.Context, dataDir string, names []string, syncAlways bool, renderers int) error {
	if dataDir == "" {
		return &usageError{"bench --target: --data-dir is required"}
	}
	cfg := config.Default()
	if p := m.Getenv("JOBGATE_BENCH_CONFIG"); p != "" { // a section's settings, e.g. fairness's webhooks
		if err := cfg.LoadFile(p); err != nil {
			return err
		}
	}
	if err := cfg.LoadEnv(m.Getenv); err != nil {
		return err
	}
	cfg.DataDir = dataDir
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NATS.URL, cfg.NATS.Listen = "", ""
	cfg.NATS.SyncAlways = syncAlways
	if renderers > 0 {
		cfg.Renderer.Concurrency = renderers
	}
	cfg.Gateway.ReadRate, cfg.Gateway.ReadBurst = 1e9, 1<<30
	cfg.Gateway.SubmitRate, cfg.Gateway.SubmitBurst = 1e9, 1<<30
	// The load sections open thousands of streams as one requester.
	cfg.Gateway.MaxStreamsPerRequester, cfg.Gateway.MaxLongPollsPerRequester = 1<<30, 1<<30
	cfg.Gateway.MaxStreamsPerTenant, cfg.Gateway.MaxLongPollsPerTenant = 1<<30, 1<<30
	cfg.Gateway.MaxStreams, cfg.Gateway.MaxLongPolls = 1<<30, 1<<30
	if m.Getenv("JOBGATE_BENCH_GATEWAY_PUBLISHES_WORK") == "1" { // the pipeline section's comparison
		cfg.Gateway.LeaveWorkToRelay = false
	}
	// "noop" is the bench's own worker (bench_noop), not a component of serve.
	noop := slices.Contains(names, "noop")
	names = slices.DeleteFunc(names, func(n string) bool { return n == "noop" })
	comps := make([]system.Component, 0, len(names))
	for _, n := range names {
		c, err := system.ParseComponent(n)
		if err != nil {
			return &usageError{"bench --target: " + err.Error()}
		}
		comps = append(comps, c)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dataDir, "jobgate.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	var env bench.TargetEnv
	var workers []system.WorkerFunc
	if !slices.Contains(names, "renderer") {
		// Types are declared by their workers: a target without the
		// renderer declares permit_report as a renderer elsewhere in the
		// deployment would, so the gateway admits it.
		workers = append(workers, system.Declare(&job.TypeDecl{Name: "permit_report", Description: "permit report (declared by jobgate bench)",
			Schema: renderer.Schema, TimeoutSeconds: int(cfg.RenderTimeout / time.Second), Attempts: cfg.MaxAttempts,
			MaxResultBytes: cfg.Renderer.MaxOutputBytes, ContentType: "application/pdf"}))
	}
	if noop {
		// Started before the gateway, so the type is declared when the
		// bench submits; stopped after it, like serve's renderer; on a
		// connection of its own, as a user's worker process would be.
		// The flow section's: "1" (both limits), "concurrency" or "rate".
		fl := m.Getenv("JOBGATE_BENCH_NOOP_FLOW")
		env.Noop = &bench.Noop{Flow: fl != "", FlowOnly: strings.TrimPrefix(fl, "1")}
		workers = append(workers, func(s *system.System, nc *nats.Conn) (system.Service, error) {
			w, err := worker.New(worker.Config{Conn: nc, Logger: s.Logger().With("service", "bench_noop"), OnAttempt: env.Noop.OnAttempt})
			if err != nil {
				return nil, err
			}
			if err := env.Noop.Register(w, bench.NoopWorkers); err != nil {
				return nil, err
			}
			return w, nil
		})
	}
	sc := system.Config{Settings: &cfg, Components: comps, LogOutput: logFile, Workers: workers}
	// The flow section's: a credential's requests a second at the broker
	// (default 2,000, a burst of twice that), raised so that the one
	// worker credential's limit, and its workers' backoff from it, is not
	// what a pipeline measures.
	if v := m.Getenv("JOBGATE_BENCH_CREDENTIAL_RATE"); v != "" {
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil || rate <= 0 {
			return fmt.Errorf("JOBGATE_BENCH_CREDENTIAL_RATE: %q is no rate", v)
		}
		sc.Dispatcher = func(dc *dispatcher.Config) { dc.Broker.Rate, dc.Broker.Burst = rate, 2*rate }
	}
	sys, err := system.Start(ctx, sc)
	if err != nil {
		return err
	}
	defer func() { _ = sys.Stop(context.Background()) }()
	env.Res, env.Log, env.Conns = sys.Resources(), sys.Logger(), sys.Conns
	if gw := sys.Gateway(); gw != nil {
		env.URL, env.SSEStreams = sys.URL(), gw.SSEStreams
	}
	return bench.ServeTarget(ctx, env, m.Stdin, m.Stdout)
}
