package chaos

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/test/chaos/netns"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go"
)

// Options shape one run. Zero fields take the defaults of Defaults.
type Options struct {
	Seed     uint64
	Duration time.Duration // how long the nemesis injects faults
	// Bound: after the faults stop, every admitted job is terminal (and its
	// terminal change delivered by webhook) within this.
	Bound time.Duration

	Clients      int           // submitting goroutines
	Think        time.Duration // mean pause between a client's submissions
	FaultGap     time.Duration // mean quiet time between two faults
	FaultHold    time.Duration // mean time a process stays killed or paused
	Lanes        int           // concurrent fault lanes; only the first touches NATS
	LongPausePct int           // percent of pauses that last 16-40s (zombie processes); -1: none
	ReplayPct    int           // share of submissions that replay an acknowledged key
	ConflictPct  int           // share that reuses a key with another body (409 expected)
	BatchPct     int           // share of the other submissions that are batches of 2-5 jobs; -1: none
	CancelPct    int           // share of admitted jobs canceled soon after
	FollowPct    int           // share of admitted jobs followed (half by polls, half SSE)
	MaxFollowers int
	// ScheduledPct is the share of jobs submitted with a delay of 2-6 s
	// (run_at ahead: admitted scheduled); -1: none.
	ScheduledPct int
	// FlowPct is the share of jobs of the flow-limited type (flowType,
	// worked by the harness: one job per customer at once, a rate limit);
	// -1: none.
	FlowPct     int
	WebhookFail int  // percent of webhook deliveries the sink answers 503
	SyncAlways  bool // nats-server sync_interval "always"
	// Partitions runs each NATS node in a network namespace of its own
	// (root only; package netns), with the jobgate processes spread over
	// them, and lets lane 0 cut the network too (docs/reliability.md).
	Partitions bool
	NetPct     int // share of lane 0's faults that are network faults (Partitions only); -1: none
	// PowerLossPct is the share of lane 0's faults that kill a NATS node and
	// drop what its store wrote since a point within the last sync interval
	// (its unsynced tail) before it starts again; -1: none.
	PowerLossPct int
	Strict       bool // count KnownIssues as anomalies too

	Root     string // module root; default: found above the working dir
	WorkDir  string // default: a new temp dir
	Keep     bool   // keep the stores and binaries of a clean run too
	Race     bool   // build jobgate with -race
	Binaries *Binaries
	Logf     func(format string, args ...any)
}

// Defaults fills the zero fields of o.
func (o *Options) Defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defi := func(d *int, v int) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Duration, 10*time.Minute)
	def(&o.Bound, 2*time.Minute)
	def(&o.Think, 400*time.Millisecond)
	def(&o.FaultGap, 3*time.Second)
	def(&o.FaultHold, 3*time.Second)
	defi(&o.Clients, 6)
	defi(&o.Lanes, 2)
	defi(&o.LongPausePct, 20)
	defi(&o.ReplayPct, 8)
	defi(&o.ConflictPct, 3)
	defi(&o.BatchPct, 25)
	defi(&o.CancelPct, 4)
	defi(&o.FollowPct, 40)
	defi(&o.MaxFollowers, 12)
	defi(&o.WebhookFail, 5)
	defi(&o.ScheduledPct, 10)
	defi(&o.FlowPct, 15)
	if o.Partitions {
		defi(&o.NetPct, 40)
		defi(&o.PowerLossPct, 10)
	}
	if o.Logf == nil {
		o.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", args...) }
	}
}

const (
	tenant     = "4"
	authSecret = "chaos-auth-secret-not-for-production"
)

var requesters = []string{"alice", "bob"}

// Run starts the deployment, drives it through the faults, records the
// final state and checks the history. It returns the report (whose
// Anomalies say whether the run passed) and the history's path.
func Run(ctx context.Context, o Options) (*Report, string, error) {
	o.Defaults()
	if o.Root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, "", err
		}
		if o.Root, err = ModuleRoot(wd); err != nil {
			return nil, "", err
		}
	}
	if o.WorkDir == "" {
		d, err := os.MkdirTemp("", "jobgate-chaos-")
		if err != nil {
			return nil, "", err
		}
		o.WorkDir = d
	}
	for _, d := range []string{"logs", "bin"} {
		if err := os.MkdirAll(filepath.Join(o.WorkDir, d), 0o755); err != nil {
			return nil, "", err
		}
	}
	histPath := filepath.Join(o.WorkDir, "history.jsonl")
	h, err := CreateHistory(histPath)
	if err != nil {
		return nil, "", err
	}
	r := &run{o: &o, h: h}
	runErr := r.run(ctx)
	if err := h.Close(); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return nil, histPath, runErr
	}
	entries, err := ReadHistory(histPath)
	if err != nil {
		return nil, histPath, err
	}
	rep := Check(entries, o.Bound, o.Strict)
	if err := os.WriteFile(filepath.Join(o.WorkDir, "report.txt"), []byte(rep.String()), 0o644); err != nil {
		return rep, histPath, err
	}
	if len(rep.Anomalies) == 0 && !o.Keep {
		// A clean run keeps its history, report and logs; the stores and
		// binaries (hundreds of MB) go.
		for _, d := range []string{"nats", "data", "bin", "token"} {
			_ = os.RemoveAll(filepath.Join(o.WorkDir, d))
		}
	}
	return rep, histPath, nil
}

type run struct {
	o     *Options
	h     *History
	procs []*proc
	nats  []*proc
	gws   []string
	hook  *webhookSink
	smtp  *jobtest.SMTPSink
	stats faultStats
	cs    clientStats
	net   *netns.Net // partition runs only

	mu       sync.Mutex
	jobs     map[string]string // job id → requester
	batches  map[string]*admittedBatch
	stopping bool
	restarts sync.WaitGroup
}

func (r *run) run(ctx context.Context) error {
	o := r.o
	r.jobs = map[string]string{}
	r.batches = map[string]*admittedBatch{}
	r.h.Add(Entry{Kind: "phase", Phase: "start", Seed: o.Seed, Note: fmt.Sprintf("duration %s, bound %s, clients %d, work dir %s", o.Duration, o.Bound, o.Clients, o.WorkDir)})
	bins := o.Binaries
	if bins == nil {
		o.Logf("building jobgate and nats-server into %s", filepath.Join(o.WorkDir, "bin"))
		b, err := BuildBinaries(ctx, o.Root, filepath.Join(o.WorkDir, "bin"), o.Race)
		if err != nil {
			return err
		}
		bins = &b
	}

	// Sinks first: the notifier's configuration names them.
	sink, stopSMTP, err := jobtest.ServeSMTPSink()
	if err != nil {
		return err
	}
	defer func() { _ = stopSMTP() }()
	r.smtp = sink
	hookKey := make([]byte, 24)
	_, _ = rand.Read(hookKey)
	r.hook, err = startWebhookSink(r.h, hookKey, o.Seed, o.WebhookFail)
	if err != nil {
		return err
	}
	defer r.hook.close()

	var nodes []nodeAddr
	var httpAddrs []string
	if o.Partitions {
		// Each node in a namespace of its own: the same ports on every
		// node's address, nothing to reserve on the host.
		if r.net, err = netns.Setup(ctx, 3); err != nil {
			return fmt.Errorf("network namespaces: %w", err)
		}
		defer func() {
			if err := r.net.Close(); err != nil {
				o.Logf("removing the network namespaces: %v", err)
			}
		}()
		for i := range 3 {
			nodes = append(nodes, nodeAddr{host: r.net.IP(i), client: 4222, route: 6222, monitor: 8222})
		}
		httpAddrs = []string{r.net.IP(0) + ":8080", r.net.IP(1) + ":8080"}
		o.Logf("network namespaces %s, %s, %s on %s/24", r.net.Name(0), r.net.Name(1), r.net.Name(2), r.net.HostIP())
	} else {
		ports, err := freePorts(11)
		if err != nil {
			return err
		}
		for i := range 3 {
			nodes = append(nodes, nodeAddr{host: "127.0.0.1", client: ports[i], route: ports[3+i], monitor: ports[6+i]})
		}
		httpAddrs = []string{fmt.Sprintf("127.0.0.1:%d", ports[9]), fmt.Sprintf("127.0.0.1:%d", ports[10])}
	}
	defer r.stopAll()
	if err := r.startNATS(bins.NATSServer, nodes); err != nil {
		return err
	}
	urls := make([]string, 3)
	for i, n := range nodes {
		urls[i] = fmt.Sprintf("nats://%s:%d", n.host, n.client)
	}
	natsURL := strings.Join(urls, ",")
	cfgPath, err := r.writeConfig(natsURL, base64.StdEncoding.EncodeToString(hookKey))
	if err != nil {
		return err
	}
	if err := r.startJobgate(bins.Jobgate, cfgPath, natsURL, httpAddrs); err != nil {
		return err
	}
	tokens := map[string]string{}
	for _, rq := range requesters {
		cmd := exec.CommandContext(ctx, bins.Jobgate, "token", "--tenant", tenant, "--subject", rq, "--ttl", "24h")
		cmd.Env = append(os.Environ(), "JOBGATE_AUTH_SECRET="+authSecret, "JOBGATE_DATA_DIR="+filepath.Join(o.WorkDir, "token"))
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("jobgate token: %w", err)
		}
		tokens[rq] = strings.TrimSpace(string(out))
	}
	r.waitType(ctx, newAPI(r.gws, tokens), "permit_report")
	nc, err := nats.Connect(natsURL, nats.Name("chaos-observer"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return fmt.Errorf("observer: %w", err)
	}
	defer nc.Close()
	if o.FlowPct > 0 {
		stop, err := startFlowWorker(ctx, natsURL, r.h)
		if err != nil {
			return err
		}
		defer stop()
		r.waitType(ctx, newAPI(r.gws, tokens), flowType)
	}

	// The faults and the clients.
	a := newAPI(r.gws, tokens)
	lanes := make([][]fault, o.Lanes)
	planned := 0
	for lane := range lanes {
		first := 0
		if lane > 0 {
			first = len(r.nats) // only lane 0 touches NATS nodes
		}
		lanes[lane] = plan(o.Seed, lane, first, len(r.procs), o)
		planned += len(lanes[lane])
	}
	o.Logf("seed %d: %d faults planned over %s in %d lanes; %d clients; work dir %s", o.Seed, planned, o.Duration, o.Lanes, o.Clients, o.WorkDir)
	r.h.Add(Entry{Kind: "phase", Phase: "faults-start", Note: fmt.Sprintf("%d faults planned in %d lanes", planned, o.Lanes)})
	start := time.Now()
	submitting, stopSubmitting := context.WithCancel(ctx)
	defer stopSubmitting()
	// Clients finish what they started (retries, follows) until the bound
	// after the faults has passed.
	clientCtx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	var clients, followers sync.WaitGroup
	slots := make(chan struct{}, o.MaxFollowers)
	for i := range o.Clients {
		c := &client{
			id: i + 1, requester: requesters[i%len(requesters)], api: a, h: r.h, stats: &r.cs, opts: o,
			rng: newRand(o.Seed, uint64(i+1)), follow: slots, followers: &followers, jobs: r.admitted, batches: r.admittedBatch,
		}
		clients.Go(func() { c.run(submitting, clientCtx) })
	}
	nem := &nemesis{procs: r.procs, h: r.h, stats: &r.stats, log: o.Logf}
	if r.net != nil {
		nem.net = r.net
		nem.leader = func(ctx context.Context) int { return jobsLeader(ctx, nc) }
	}
	if o.PowerLossPct > 0 {
		stores := newStoreLog(o.Seed, o.SyncAlways)
		var dirs []string
		for _, p := range r.nats {
			dirs = append(dirs, p.store)
		}
		sampling, stopSampling := context.WithCancel(ctx)
		defer stopSampling()
		go stores.run(sampling, dirs)
		nem.dropUnsynced = func(p *proc) (string, error) { return stores.drop(p.store) }
	}
	nemDone := make(chan struct{})
	go func() { defer close(nemDone); nem.run(ctx, lanes) }()
	progress := time.NewTicker(30 * time.Second)
	defer progress.Stop()
wait:
	for {
		select {
		case <-nemDone:
			break wait
		case <-progress.C:
			o.Logf("%s: faults %v, %d requests, %d jobs", time.Since(start).Round(time.Second), r.stats.snapshot(), r.cs.attempts.Load(), r.jobCount())
		}
	}
	// The load runs for the whole duration, also when the last fault ended
	// early (or none was planned).
	sleepCtx(ctx, time.Until(start.Add(o.Duration)))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// Every process is up and running again: the nemesis ends each fault
	// with a restart it waits for, or a SIGCONT.
	r.restarts.Wait()
	faultsStopped := time.Now()
	deadline := faultsStopped.Add(o.Bound)
	timer := time.AfterFunc(o.Bound, stopClients)
	defer timer.Stop()
	r.h.Add(Entry{Kind: "phase", Phase: "faults-stopped"})
	o.Logf("faults stopped after %s: %v; waiting up to %s for every job to finish", time.Since(start).Round(time.Second), r.stats.snapshot(), o.Bound)
	stopSubmitting()
	clients.Wait()
	settleCtx, stopSettle := context.WithDeadline(ctx, deadline)
	defer stopSettle()
	n, pending, inHand := r.waitSettled(settleCtx, nc)
	r.h.Add(Entry{Kind: "phase", Phase: "settled", Note: fmt.Sprintf("%d jobs, %d not settled, %d record changes in the relays' hands, after %s", n, pending, inHand, time.Since(faultsStopped).Round(time.Millisecond))})
	o.Logf("settled after %s: %d jobs, %d not settled, %d record changes in the relays' hands", time.Since(faultsStopped).Round(time.Second), n, pending, inHand)
	waitGroup(&followers, 20*time.Second)
	stopClients()
	waitGroup(&followers, 5*time.Second)

	r.snapshot(ctx, nc, a)
	r.h.Add(Entry{Kind: "phase", Phase: "end"})
	return nil
}

func (r *run) admitted(requester, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs[id] = requester
}

// admittedBatch is an acknowledged batch: its jobs count as admitted, and
// with notify "batch" the run has settled only once its one notice was
// delivered (its items get none of their own).
type admittedBatch struct {
	requester, notify string
	jobs              []string
}

func (r *run) admittedBatch(requester, id, notify string, jobs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches[id] = &admittedBatch{requester: requester, notify: notify, jobs: jobs}
	for _, j := range jobs {
		r.jobs[j] = requester
	}
}

func (r *run) jobCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.jobs)
}

func waitGroup(wg *sync.WaitGroup, timeout time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

func (r *run) newProc(name, kind string, argv []string, health string) *proc {
	p := &proc{name: name, kind: kind, argv: argv, dir: r.o.WorkDir, log: filepath.Join(r.o.WorkDir, "logs", name+".log"), health: health}
	p.onExit = r.unexpectedExit
	r.procs = append(r.procs, p)
	return p
}

// unexpectedExit records a process that exited without being killed (an
// anomaly) and starts it again, so the run goes on.
func (r *run) unexpectedExit(p *proc, err error) {
	r.mu.Lock()
	stopping := r.stopping
	if !stopping {
		r.restarts.Add(1)
	}
	r.mu.Unlock()
	if stopping {
		return
	}
	defer r.restarts.Done()
	r.h.Add(Entry{Kind: "exit", Target: p.name, Note: fmt.Sprintf("%v; log %s", err, p.log)})
	r.o.Logf("%s exited on its own (%v); restarting it", p.name, err)
	time.Sleep(500 * time.Millisecond)
	(&nemesis{h: r.h}).restart(context.Background(), p)
}

// nodeAddr is where one NATS node listens.
type nodeAddr struct {
	host                   string
	client, route, monitor int
}

// inNode returns argv run in node i's network namespace in a partition
// run (i < 0: on the host), argv itself otherwise.
func (r *run) inNode(i int, argv []string) []string {
	if r.net == nil || i < 0 {
		return argv
	}
	return append(r.net.Exec(i), argv...)
}

func (r *run) startNATS(bin string, nodes []nodeAddr) error {
	var routes []string
	for _, n := range nodes {
		routes = append(routes, fmt.Sprintf("%s:%d", n.host, n.route))
	}
	for i, n := range nodes {
		name := fmt.Sprintf("n%d", i+1)
		store := filepath.Join(r.o.WorkDir, "nats", name)
		cfg := filepath.Join(r.o.WorkDir, "nats-"+name+".conf")
		if err := os.WriteFile(cfg, []byte(natsConfig(name, n.host, n.client, n.route, n.monitor, routes, store, r.o.SyncAlways)), 0o644); err != nil {
			return err
		}
		p := r.newProc("nats-"+name, KindNATS, r.inNode(i, []string{bin, "-c", cfg}), fmt.Sprintf("http://%s:%d/healthz", n.host, n.monitor))
		p.node, p.store = i, store
		r.nats = append(r.nats, p)
		if err := p.start(); err != nil {
			return err
		}
	}
	for _, p := range r.nats {
		if err := p.waitHealthy(context.Background(), 60*time.Second); err != nil {
			return fmt.Errorf("NATS node %s: %w", p.name, err)
		}
	}
	return nil
}

// writeConfig writes the jobgate YAML (as JSON, which YAML reads) every
// component is started with.
func (r *run) writeConfig(natsURL, hookSecret string) (string, error) {
	addrs := map[string]string{}
	for _, rq := range requesters {
		addrs[tenant+"/"+rq] = rq + "@example.test"
	}
	cfg := map[string]any{
		"auth_secret": authSecret,
		"log_format":  "json",
		"nats":        map[string]any{"url": natsURL, "replicas": 3},
		"gateway":     map[string]any{"read_rate": 500, "read_burst": 1000, "submit_rate": 100, "submit_burst": 200},
		"notifier": map[string]any{
			"allow_private_webhooks": true,
			"webhook_retries":        []string{"1s", "2s", "4s", "8s", "15s", "30s"},
			"webhooks":               map[string]any{tenant: []map[string]any{{"url": r.hook.url, "secret": "whsec_" + hookSecret}}},
			"mail": map[string]any{
				"smtp_host": r.smtp.Host, "smtp_port": r.smtp.Port, "from": "jobgate@example.test", "addresses": addrs,
			},
		},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(r.o.WorkDir, "jobgate.yaml")
	return path, os.WriteFile(path, b, 0o644)
}

// placement is the node whose network namespace runs each jobgate process
// in a partition run (-1: the host). The notifiers run on the host beside
// the webhook and mail sinks they deliver to, as the clients do.
var placement = map[string]int{
	"gateway-1": 0, "renderer-1": 0, "dispatcher-1": 0,
	"gateway-2": 1, "renderer-2": 1,
	"dispatcher-2": 2,
	"notifier-1":   -1, "notifier-2": -1,
}

func (r *run) startJobgate(bin, cfg, natsURL string, httpAddrs []string) error {
	common := func(cmd, name string) []string {
		return r.inNode(placement[name], []string{bin, cmd, "--config", cfg, "--nats", natsURL, "--replicas", "3", "--data-dir", filepath.Join(r.o.WorkDir, "data", name)})
	}
	var started []*proc
	for i, addr := range httpAddrs {
		name := fmt.Sprintf("gateway-%d", i+1)
		p := r.newProc(name, KindGateway, append(common("gateway", name), "--http-addr", addr), "http://"+addr+"/readyz")
		r.gws = append(r.gws, "http://"+addr)
		started = append(started, p)
	}
	for _, c := range []struct{ name, kind string }{
		{"renderer-1", KindRenderer}, {"renderer-2", KindRenderer}, {"dispatcher-1", KindDispatcher}, {"dispatcher-2", KindDispatcher},
		{"notifier-1", KindNotifier}, {"notifier-2", KindNotifier},
	} {
		started = append(started, r.newProc(c.name, c.kind, common(c.kind, c.name), ""))
	}
	for _, p := range started {
		if err := p.start(); err != nil {
			return err
		}
	}
	for _, p := range started {
		if err := p.waitHealthy(context.Background(), 90*time.Second); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return nil
}

// waitType waits (at most 90s) until every gateway lists the job type in
// GET /v1/types: types are declared by the workers at run time, and a
// submission before that would rightly be refused. A gateway without the
// endpoint (404) accepts the built-in type at once.
func (r *run) waitType(ctx context.Context, a *api, name string) {
	deadline := time.Now().Add(90 * time.Second)
	for _, gw := range a.gateways {
		for {
			resp, data, err := a.do(ctx, a.short, http.MethodGet, gw+"/v1/types", requesters[0], nil, nil)
			if err == nil && (resp.StatusCode == http.StatusNotFound ||
				resp.StatusCode == http.StatusOK && strings.Contains(string(data), `"`+name+`"`)) {
				break
			}
			if time.Now().After(deadline) || !sleepCtx(ctx, 250*time.Millisecond) {
				r.o.Logf("%s does not list job type %s yet; starting anyway", gw, name)
				break
			}
		}
	}
}

// stopAll stops the jobgate processes, then the NATS nodes.
func (r *run) stopAll() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range r.procs {
		if p.kind != KindNATS {
			wg.Go(func() { p.terminate(15 * time.Second) })
		}
	}
	wg.Wait()
	for _, p := range r.nats {
		wg.Go(func() { p.terminate(15 * time.Second) })
	}
	wg.Wait()
}
