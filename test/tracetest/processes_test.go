package tracetest

import (
	"fmt"
	"github.com/jobgate/jobgate/test/jobtest"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// natsModule is the nats-server main package, built from the version go.mod
// pins (as test/chaos builds it).
const natsModule = "github.com/nats-io/nats-server/v2"

// natsConfig: one JetStream node on loopback, its monitor answering
// /healthz; the limits are the chaos harness's, which hold jobgate's byte
// budgets.
const natsConfig = `listen: %q
http: %q
max_payload: 8MB
jetstream {
  store_dir: %q
  max_memory_store: 256MB
  max_file_store: 24GB
}
`

// componentConfig is every component's file: the gateway takes http_addr
// and the secret, the notifier the webhook (as serveConfig's), the rest
// ignore what is not theirs. Each process's data dir is a flag.
const componentConfig = `http_addr: %q
auth_secret: %q
log_format: json
notifier:
  allow_private_webhooks: true
  webhook_retries: [100ms, 100ms]
  webhooks:
    "4":
      - url: %q
        secret: %q
        states: [succeeded]
`

// The services the components export under. Not jobgate-<component>, the
// names a component takes by default: the test must see OTEL_SERVICE_NAME
// honoured, not a default that happens to match.
const (
	gatewayService    = "tracetest-gateway"
	dispatcherService = "tracetest-dispatcher"
	rendererService   = "tracetest-renderer"
	notifierService   = "tracetest-notifier"
)

// One job's trace across processes: gateway, dispatcher, renderer and
// notifier run as four OS processes of the jobgate binary on one
// nats-server, each exporting to the Collector under its own
// OTEL_SERVICE_NAME. The trace is the same as serve's (checkJobTrace),
// but every parent/child link the test follows now crosses a process by
// what NATS carries: the gateway's admission is the parent of the
// dispatcher's relay publish and attempt (through the job record) and of
// the notifier's delivery (through the event); the dispatcher's attempt
// is the parent of the renderer's handler span (through the assignment)
// and of the upload the dispatcher's broker takes from it. Each span must
// come from the process that does its work: the admission from the
// gateway, the relay's publish, the attempt and the result upload from
// the dispatcher (the broker runs there and stores the result), the
// handler span from the renderer, the webhook POST from the notifier.
// Each process is stopped with SIGTERM, which flushes its spans.
func TestAJobsTraceCrossesProcesses(t *testing.T) {
	root := jobtest.RepoRoot(t)
	col := startCollector(t, root)
	dir := t.TempDir()
	jobgate, natsServer := filepath.Join(dir, "jobgate"), filepath.Join(dir, "nats-server")
	var jobgateErr, natsErr error
	var builds sync.WaitGroup
	builds.Go(func() { jobgateErr = jobtest.GoBuild(root, jobgate, "./cmd/jobgate") })
	builds.Go(func() { natsErr = jobtest.GoBuild(root, natsServer, natsModule) })
	builds.Wait()
	require.NoError(t, jobgateErr)
	require.NoError(t, natsErr)
	hooks := startHookReceiver(t)

	natsAddr, monitor := jobtest.FreeAddr(t), jobtest.FreeAddr(t)
	natsConf := writeFile(t, dir, "nats.conf", fmt.Sprintf(natsConfig, natsAddr, monitor, filepath.Join(dir, "nats")))
	nats := start(t, "nats-server", natsServer, []string{"-c", natsConf}, jobtest.ChildEnv())
	nats.waitFor(t, "nats-server's /healthz to answer 200", time.Minute, func() error {
		if status, _ := get("http://" + monitor + "/healthz"); status != http.StatusOK {
			return fmt.Errorf("/healthz answers %d", status)
		}
		return nil
	})

	secret, httpAddr := "tracetest-secret", jobtest.FreeAddr(t)
	conf := writeFile(t, dir, "jobgate.yaml", fmt.Sprintf(componentConfig, httpAddr, secret, hooks.url, webhookSecret))
	component := func(name, service string, flags ...string) *proc {
		args := append([]string{name, "--config", conf, "--nats", "nats://" + natsAddr,
			"--data-dir", filepath.Join(dir, "data", name)}, flags...)
		return start(t, "jobgate "+name, jobgate, args, col.env(service))
	}
	// All four at once, as a deployment's may start: whichever is first
	// provisions the streams, the renderer waits for them.
	gw := component("gateway", gatewayService)
	disp := component("dispatcher", dispatcherService)
	rend := component("renderer", rendererService)
	// Debug: the notifier logs each delivery it got an answer for.
	notif := component("notifier", notifierService, "--log-level", "debug")
	for _, p := range []*proc{gw, disp, rend, notif} {
		p.waitFor(t, "it to log that it is running", 90*time.Second, func() error {
			if !strings.Contains(p.out.String(), `"msg":"running"`) {
				return fmt.Errorf("%s has not logged that it is running", p.name)
			}
			return nil
		})
	}
	base, tok := "http://"+httpAddr, mint(t, secret)
	// The renderer declares permit_report when it starts; the gateway
	// refuses a type no worker declared, so the submission waits for it.
	gw.waitFor(t, "the gateway to list permit_report", 30*time.Second, func() error {
		if status, body := getAuth(base+"/v1/types", tok); status != http.StatusOK || !strings.Contains(body, `"permit_report"`) {
			return fmt.Errorf("/v1/types answers %d: %.200s", status, body)
		}
		return nil
	})

	traceID, callerSpan := randomHex(t, 16), randomHex(t, 8)
	id := submit(t, base, tok, "00-"+traceID+"-"+callerSpan+"-01", permitReport)
	hook := hooks.wait(t, id)
	// The delivery's span ends once the notifier has the receiver's answer
	// and has logged it; a stop before that would cut the span short
	// (canceled) rather than flush it.
	notif.waitFor(t, "the notifier to log the delivery", 30*time.Second, func() error {
		if !strings.Contains(notif.out.String(), `"msg":"webhook delivered"`) {
			return fmt.Errorf("%s has not logged the delivery", notif.name)
		}
		return nil
	})
	// In the order serve stops its components: nothing new is admitted,
	// the workers give back what they hold, the dispatcher relays the
	// last changes, the notifier delivers them. NATS outlives them all.
	for _, p := range []*proc{gw, rend, disp, notif} {
		p.stop(t, time.Minute)
	}
	nats.stop(t, 30*time.Second)

	checkJobTrace(t, col.collect(t), jobTrace{traceID: traceID, callerSpan: callerSpan, jobID: id, hook: hook}, map[string]string{
		"POST /v1/jobs":         gatewayService,
		"relay publish":         dispatcherService,
		"attempt permit_report": dispatcherService,
		"result upload":         dispatcherService,
		"run permit_report":     rendererService,
		"webhook POST":          notifierService,
	})
}

// getAuth is get with a bearer token.
func getAuth(url, tok string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return do(req)
}
