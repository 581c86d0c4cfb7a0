package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Section names, in the order they run.
const (
	SecFloor     = "floor"
	SecAdmission = "admission"
	SecReplay    = "replay"
	SecConflict  = "conflict"
	SecStatus    = "status"
	SecE2E       = "e2e"
	SecPipeline  = "pipeline"
	SecWatch     = "watch"
	SecFootprint = "footprint"
	SecLevers    = "levers" // opt in: not part of AllSections
	// SecFairRenders and SecFairNotices are the halves of SecFairness,
	// each selectable alone.
	SecFairRenders = "fairness-renders"
	SecFairNotices = "fairness-notices"
	// SecFairness (fairness.go) is in AllSections, after footprint.
)

// AllSections lists every section.
var AllSections = []string{SecFloor, SecAdmission, SecReplay, SecConflict, SecStatus, SecE2E, SecPipeline, SecWatch, SecFootprint, SecFairness, SecBatch, SecTracing, SecEndpoints, SecNetHTTP, SecFlow}

// Options configures a run. Zero fields take the defaults noted.
type Options struct {
	// Launch starts the target process. Required unless URL is set.
	Launch Launcher
	// URL, when set, benchmarks an already running gateway instead; the
	// sections that need the target process (floor, footprint, the
	// watching CPU and change driver) are skipped. AuthSecret must be its
	// token secret.
	URL        string
	AuthSecret []byte
	// WorkDir holds the targets' data dirs (default: a new temp dir,
	// removed afterwards).
	WorkDir string
	// Duration of each throughput figure (default 5s).
	Duration time.Duration
	// Clients is the number of concurrent HTTP clients (default 32).
	Clients int
	// Fsync: "both" (default), "default" or "always".
	Fsync string
	// Sections to run (default all).
	Sections []string
	// E2EJobs is the number of 1-page jobs timed end to end (default 100);
	// RenderJobs the number of 63-page jobs per renderer count (default 150).
	E2EJobs    int
	RenderJobs int
	// FairJobs is tenant A's backlog of 63-page reports in the fairness
	// section (default 1000).
	FairJobs int
	// Watchers (default 83) watch their own job for WatchWindow (default
	// 60s) in each mode; the jobs change every ChangeInterval (default 10s).
	Watchers       int
	WatchWindow    time.Duration
	ChangeInterval time.Duration
	// SSEStreams are held open for the footprint (default 1000);
	// FootprintJobs are admitted before the last RSS reading (default
	// 100000).
	SSEStreams    int
	FootprintJobs int
	// FlowScheduled jobs wait scheduled an hour ahead while the flow
	// section measures the lateness of others (default 100000).
	FlowScheduled int
	// FlowRate is the rate (jobs a second) at which the flow section's
	// paced pipeline offers jobs to each target (default 600): below what
	// either target can take, so that both do the same work and the
	// target's CPU a job is the cost compared.
	FlowRate float64
	// AsynqBench is the tools/asynqbench binary of the nethttp section's
	// Asynq comparison (default: asynqbench on PATH).
	AsynqBench string
	// ProfileDir, if set, receives a CPU profile of the target for each
	// throughput figure (<section>-<fsync>.pprof).
	ProfileDir string
	// Log receives progress lines (default: discarded).
	Log io.Writer
}

func (o *Options) withDefaults() error {
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.Clients <= 0 {
		o.Clients = 32
	}
	if o.Fsync == "" {
		o.Fsync = "both"
	}
	if o.Fsync != "both" && o.Fsync != "default" && o.Fsync != "always" {
		return fmt.Errorf("bench: fsync must be both, default or always, got %q", o.Fsync)
	}
	if len(o.Sections) == 0 {
		o.Sections = AllSections
	}
	for _, s := range o.Sections {
		if !slices.Contains(AllSections, s) && s != SecLevers && s != SecFairRenders && s != SecFairNotices {
			return fmt.Errorf("bench: unknown section %q (have %s, %s, %s, %s)", s, strings.Join(AllSections, ", "), SecFairRenders, SecFairNotices, SecLevers)
		}
	}
	if o.E2EJobs <= 0 {
		o.E2EJobs = 100
	}
	if o.RenderJobs <= 0 {
		o.RenderJobs = 150
	}
	if o.FairJobs <= 0 {
		o.FairJobs = 1000
	}
	if o.Watchers <= 0 {
		o.Watchers = 83
	}
	if o.WatchWindow <= 0 {
		o.WatchWindow = 60 * time.Second
	}
	if o.ChangeInterval <= 0 {
		o.ChangeInterval = 10 * time.Second
	}
	if o.SSEStreams <= 0 {
		o.SSEStreams = 1000
	}
	if o.FootprintJobs <= 0 {
		o.FootprintJobs = 100_000
	}
	if o.FlowScheduled <= 0 {
		o.FlowScheduled = 100_000
	}
	if o.FlowRate <= 0 {
		o.FlowRate = 600
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.URL == "" && o.Launch == nil {
		return errors.New("bench: a launcher or a URL is required")
	}
	if o.URL != "" && len(o.AuthSecret) == 0 {
		return errors.New("bench: --url needs the gateway's auth secret")
	}
	return nil
}

// runner carries one run's state.
type runner struct {
	o      Options
	rep    *Report
	secret string
	seq    int
}

// Run executes the selected sections and returns the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.withDefaults(); err != nil {
		return nil, err
	}
	r := &runner{o: o, rep: &Report{Machine: probeMachine(), Started: time.Now(), Settings: map[string]string{}}}
	r.rep.Machine.Generator = "this process (a second process beside the target; its CPU is reported as gen)"
	if o.URL != "" {
		r.rep.Machine.Generator = "this process, against " + o.URL + " (target CPU and memory not measured)"
		r.secret = string(o.AuthSecret)
	} else {
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		r.secret = hex.EncodeToString(b)
		if r.o.WorkDir == "" {
			dir, err := os.MkdirTemp("", "jobgate-bench-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			r.o.WorkDir = dir
		}
	}
	set := r.rep.Settings
	set["duration"] = o.Duration.String()
	set["clients"] = strconv.Itoa(o.Clients)
	set["fsync"] = o.Fsync
	set["watchers"] = strconv.Itoa(o.Watchers)
	set["watch_window"] = o.WatchWindow.String()
	set["change_interval"] = o.ChangeInterval.String()
	set["sse_streams"] = strconv.Itoa(o.SSEStreams)
	set["footprint_jobs"] = strconv.Itoa(o.FootprintJobs)
	set["flow_scheduled"] = strconv.Itoa(o.FlowScheduled)
	set["flow_rate"] = strconv.FormatFloat(o.FlowRate, 'f', -1, 64)
	set["e2e_jobs"] = strconv.Itoa(o.E2EJobs)
	set["render_jobs"] = strconv.Itoa(o.RenderJobs)
	set["fair_jobs"] = strconv.Itoa(o.FairJobs)
	set["GOGC"] = os.Getenv("GOGC")

	var errs []error
	if r.any(SecFloor, SecAdmission, SecReplay, SecConflict, SecStatus) {
		for _, always := range r.fsyncs() {
			if err := r.gatewaySuite(ctx, always); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if r.any(SecE2E) {
		if err := r.e2eSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecPipeline) && o.URL == "" {
		if err := r.pipelineSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecWatch) {
		if err := r.watchSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecFootprint) && o.URL == "" {
		if err := r.footprintSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecFairness, SecFairRenders) && o.URL == "" {
		if err := r.fairRendersSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecFairness, SecFairNotices) && o.URL == "" {
		if err := r.fairnessSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecBatch) {
		if err := r.batchSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecTracing) && o.URL == "" {
		if err := r.tracingSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecEndpoints) && o.URL == "" {
		if err := r.endpointsSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecNetHTTP) {
		if err := r.netHTTPSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecFlow) && o.URL == "" {
		if err := r.flowSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.any(SecLevers) && o.URL == "" {
		if err := r.leversSuite(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	r.rep.Seconds = time.Since(r.rep.Started).Seconds()
	r.rep.note("load average at the end: %s; cpu srv/gen/other = cores used by the target, by the load generator and by the rest of the machine", loadAvg())
	return r.rep, errors.Join(errs...)
}

func (r *runner) any(sections ...string) bool {
	for _, s := range sections {
		if slices.Contains(r.o.Sections, s) {
			return true
		}
	}
	return false
}

func (r *runner) fsyncs() []bool {
	switch r.o.Fsync {
	case "default":
		return []bool{false}
	case "always":
		return []bool{true}
	}
	return []bool{false, true}
}

func fsyncName(always bool) string {
	if always {
		return "always"
	}
	return "default"
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Log, "bench: "+format+"\n", args...)
}

// start launches a target with the given components, or returns nil in URL
// mode.
func (r *runner) start(components []string, always bool, renderers int) (*proc, error) {
	return r.startEnv(components, always, renderers, nil)
}

// startEnv is start with extra environment variables for the target.
func (r *runner) startEnv(components []string, always bool, renderers int, env []string) (*proc, error) {
	if r.o.URL != "" {
		return nil, nil
	}
	r.seq++
	spec := TargetSpec{
		DataDir:    filepath.Join(r.o.WorkDir, fmt.Sprintf("target-%d", r.seq)),
		Components: components, SyncAlways: always, RendererConcurrency: renderers, AuthSecret: r.secret, Env: env,
	}
	r.logf("starting target %d: %s (fsync %s) %s", r.seq, strings.Join(components, "+"), fsyncName(always), strings.Join(env, " "))
	p, err := startTarget(r.o.Launch, spec)
	if err != nil || !slices.Contains(components, "gateway") {
		return p, err
	}
	// The gateway learns types from their declarations: wait until it
	// admits permit_report.
	a, err := newAPI(p.ready.URL, 4, []byte(r.secret), "types")
	if err == nil {
		err = awaitType(context.Background(), a, "permit_report")
	}
	if err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// apiFor returns the load generator's client of the target (or the URL).
func (r *runner) apiFor(p *proc, tenant string) (*api, error) {
	base := r.o.URL
	if p != nil {
		base = p.ready.URL
	}
	return newAPI(base, max(4*r.o.Clients, 256), []byte(r.secret), tenant)
}

// measure wraps one figure: CPU of both processes and, if asked, a CPU
// profile of the target.
func (r *runner) measure(p *proc, name string, fn func()) usage {
	pid := 0
	if p != nil {
		pid = p.ready.PID
		if r.profile(p, opProfileStart, name+".pprof") {
			defer func() { _, _ = p.call(Request{Op: opProfileStop}) }()
		}
	}
	m := startCPU(pid)
	fn()
	return m.cores()
}

// profile has the target write (op opHeapProfile) or start (opProfileStart,
// opTraceStart) a profile called name in --profile-dir; it reports whether
// it asked, which it does only when a directory was given.
func (r *runner) profile(p *proc, op, name string) bool {
	if p == nil || r.o.ProfileDir == "" {
		return false
	}
	_ = os.MkdirAll(r.o.ProfileDir, 0o755)
	path, _ := filepath.Abs(filepath.Join(r.o.ProfileDir, name))
	if _, err := p.call(Request{Op: op, Path: path}); err != nil {
		r.logf("%s %s: %v", op, name, err)
	}
	return true
}

// permitBody is a valid submission of pages pages.
func permitBody(caseID, revision, pages int) []byte {
	return []byte(fmt.Sprintf(`{"type":"permit_report","params":{"case_id":%d,"revision":%d,"pages":%d}}`, caseID, revision, pages))
}
