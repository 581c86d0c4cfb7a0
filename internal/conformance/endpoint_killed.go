package conformance

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jobgate/jobgate/internal/childproc"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/stretchr/testify/require"
)

// startSplitDeployment is a deployment whose dispatchers are processes of
// their own, so one can be killed: `jobgate gateway` on an embedded NATS
// server that also listens on loopback, and n `jobgate dispatcher`
// processes on it (logged in as the server's operator user, whose password
// the gateway's data dir derives), each with its endpoint caller.
func startSplitDeployment(t T, bin string, n int) (*deployment, []*proc) {
	t.Helper()
	d := &deployment{bin: bin, dataDir: filepath.Join(t.TempDir(), "data")}
	addr, natsAddr := freeAddr(t), freeAddr(t)
	d.base, d.natsURL = "http://"+addr, "nats://"+natsAddr
	d.serve = start(t, "jobgate gateway", filepath.Dir(bin), childproc.Env(endpointAllow), bin,
		"gateway", "--data-dir", d.dataDir, "--http-addr", addr, "--nats-listen", natsAddr)
	waitReady(t, d)
	secret, err := natsserver.SubscriberSecret(d.dataDir)
	require.NoError(t, err)
	env := childproc.Env(endpointAllow, "JOBGATE_NATS_URL="+d.natsURL, "JOBGATE_NATS_USER="+natsserver.OperatorUser,
		"JOBGATE_NATS_PASSWORD="+natsserver.OperatorPassword(secret), "JOBGATE_PUBLIC_URL="+d.base)
	var dispatchers []*proc
	for i := range n {
		dispatchers = append(dispatchers, start(t, "jobgate dispatcher "+strconv.Itoa(i+1), filepath.Dir(bin), env, bin,
			"dispatcher", "--data-dir", filepath.Join(t.TempDir(), "dispatcher")))
	}
	for _, p := range dispatchers {
		waitLog(t, p, "endpoint caller started", 60*time.Second)
	}
	return d, dispatchers
}

// waitLog waits until p has logged msg.
func waitLog(t T, p *proc, msg string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.stderr.String(), msg) {
		if time.Now().After(deadline) || !p.alive() {
			t.Fatalf("%s: no %q logged within %s\n%s", p.name, msg, timeout, tail(p.stderr.String(), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// callerPID is the process id in an endpoint caller's worker name
// (endpoints-<host>-<pid>-<random>-g<n>, docs/endpoints.md).
var callerPID = regexp.MustCompile(`^endpoints-.*-(\d+)-[0-9a-f]{6}-g\d+$`)

// A dispatcher killed with SIGKILL while the handler holds its request:
// the request's connection closes (the handler sees it end), the attempt
// is lost, and another dispatcher takes the job over once the claim goes
// stale, as attempt 2; the handler never has two requests of the job in
// flight, and the job succeeds once. Beside it, an asynchronous attempt
// (202) held by a killed dispatcher: its next callback is answered 409
// attempt-lost (the process holding it is gone), and its attempt 2 goes
// on to succeed. Of three dispatchers, those holding either job are
// killed: one at least is left.
func endpointDispatcherKilled(t T, s *EndpointSuite, im *EndpointImpl) {
	d, dispatchers := startSplitDeployment(t, s.d.bin, 3)
	handler := s.startHandler(t, d, im, im.Name+"-killed-handler", "kill")
	typ := im.Name + "_kill"
	for _, p := range dispatchers {
		waitLog(t, p, "endpoint type running", 30*time.Second)
	}
	c := d.client(t, "ep-killed-"+im.Name, "requester")
	gate := "ep-killed-" + im.Name
	j := c.submit(t, typ, map[string]any{"mode": "hold", "gate": gate})
	aj := c.submit(t, typ, map[string]any{"mode": "async", "gate": gate + "-async"})
	handler.wait(t, 30*time.Second, "the request", eventOf("started", j.ID))
	c.until(t, aj.ID, 30*time.Second, "the 202's attempt beating", func(j jobView) bool { return j.State == "running" && j.Progress != nil })

	holders := map[*proc]bool{}
	for _, id := range []string{j.ID, aj.ID} {
		holders[holderOf(t, s, d, dispatchers, id)] = true
	}
	killed := time.Now()
	for p := range holders {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		<-p.exited
	}
	handler.wait(t, 5*time.Second, "the killed dispatcher's request closing", eventOf("aborted", j.ID))
	lost := handler.wait(t, 10*time.Second, "the 202's next callback answered 409", func(e event) bool {
		return e.str("event") == "callback" && e.str("id") == aj.ID && e.num("attempt") == 1 && e.num("status") == http.StatusConflict
	})
	require.Equal(t, false, lost["canceled"], "%v", lost)

	second := handler.wait(t, 90*time.Second, "the request of attempt 2", func(e event) bool {
		return e.str("event") == "started" && e.str("id") == j.ID && e.num("attempt") == 2
	})
	t.Logf("%s: %d of 3 dispatchers killed; attempt 2 sent %s after the SIGKILL", im.Name, len(holders), time.Since(killed).Round(time.Millisecond))
	require.Equal(t, 1, second.num("in_flight"), "never two requests of the job in flight")
	require.Equal(t, j.ID+".a2", second.str("webhook_id"))
	handler.wait(t, 90*time.Second, "the 202's attempt 2", func(e event) bool {
		return e.str("event") == "started" && e.str("id") == aj.ID && e.num("attempt") == 2
	})
	s.open(t, gate)
	s.open(t, gate+"-async")
	for _, id := range []string{j.ID, aj.ID} {
		done := c.terminal(t, id, 30*time.Second)
		require.Equal(t, "succeeded", done.State, "%+v", done.Error)
		require.Equal(t, 2, done.Attempt)
		require.Equal(t, "done by "+im.Name+" at attempt 2\n", string(c.download(t, id).body))
		starts := handler.find(eventOf("started", id))
		require.Len(t, starts, 2, "one request an attempt")
		for _, e := range starts {
			require.Equal(t, 1, e.num("in_flight"), "never two requests of the job in flight: %v", e)
		}
		attempts := s.jobAttempts(t, d, id)
		require.Len(t, attempts, 2)
		t.Logf("%s: %s: attempt 1 %s, attempt 2 %s", im.Name, id, attempts[0].Outcome, attempts[1].Outcome)
		require.NotEqual(t, "succeeded", attempts[0].Outcome)
		require.Equal(t, "succeeded", attempts[1].Outcome)
	}
}

// A dispatcher stopped with SIGTERM while the handler holds its request:
// it lets the request run for its drain time (cut to its share of the
// stop: about 6 s), then closes it and
// gives the job back, exiting 0; the other dispatcher sends the job again
// at once, and the given-back attempt used up none of the job's one
// attempt.
func endpointDispatcherStopped(t T, s *EndpointSuite, im *EndpointImpl) {
	d, dispatchers := startSplitDeployment(t, s.d.bin, 2)
	handler := s.startHandler(t, d, im, im.Name+"-stopped-handler", "drain")
	typ := im.Name + "_drain"
	for _, p := range dispatchers {
		waitLog(t, p, "endpoint type running", 30*time.Second)
	}
	c := d.client(t, "ep-stopped-"+im.Name, "requester")
	gate := "ep-stopped-" + im.Name
	j := c.submit(t, typ, map[string]any{"mode": "hold", "gate": gate})
	handler.wait(t, 30*time.Second, "the request", eventOf("started", j.ID))
	holder := holderOf(t, s, d, dispatchers, j.ID)
	stopped := time.Now()
	require.NoError(t, holder.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-holder.exited:
		require.NoError(t, holder.err, "the stopped dispatcher exits 0")
	case <-time.After(40 * time.Second):
		t.Fatalf("%s did not stop within 40s of SIGTERM", holder.name)
	}
	handler.wait(t, time.Second, "the request closed by the drain's end", eventOf("aborted", j.ID))
	t.Logf("%s: %s stopped %s after SIGTERM", im.Name, holder.name, time.Since(stopped).Round(time.Millisecond))
	s.open(t, gate)
	done := c.terminal(t, j.ID, 30*time.Second)
	require.Equal(t, "succeeded", done.State, "the given-back job used none of its one attempt: %+v", done.Error)
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, "done by "+im.Name+" at attempt 2\n", string(c.download(t, j.ID).body))
	for _, e := range handler.find(eventOf("started", j.ID)) {
		require.Equal(t, 1, e.num("in_flight"), "never two requests of the job in flight: %v", e)
	}
}

// A dispatcher paused (SIGSTOP) while the handler holds its request, as a
// partitioned one would be: its claim goes stale and the other dispatcher
// sends attempt 2, while attempt 1's request is still open (a paused
// process closes nothing: the handler sees both). The handler then
// answers attempt 1 with a 200, and the paused dispatcher resumes
// (SIGCONT) and reports it: the broker refuses the report, its fencing
// token being attempt 1's, and the job is attempt 2's, result and all.
func endpointDispatcherPaused(t T, s *EndpointSuite, im *EndpointImpl) {
	d, dispatchers := startSplitDeployment(t, s.d.bin, 2)
	handler := s.startHandler(t, d, im, im.Name+"-paused-handler", "kill")
	typ := im.Name + "_kill"
	for _, p := range dispatchers {
		waitLog(t, p, "endpoint type running", 30*time.Second)
	}
	c := d.client(t, "ep-paused-"+im.Name, "requester")
	gate := "ep-paused-" + im.Name
	j := c.submit(t, typ, map[string]any{"mode": "hold", "gate": gate})
	handler.wait(t, 30*time.Second, "the request", eventOf("started", j.ID))
	holder := holderOf(t, s, d, dispatchers, j.ID)
	require.NoError(t, holder.cmd.Process.Signal(syscall.SIGSTOP))
	paused := true
	t.Cleanup(func() {
		if paused {
			_ = holder.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	second := handler.wait(t, 90*time.Second, "the request of attempt 2", func(e event) bool {
		return e.str("event") == "started" && e.str("id") == j.ID && e.num("attempt") == 2
	})
	require.Equal(t, 2, second.num("in_flight"), "the paused dispatcher's request is still open")
	s.open(t, gate+".a1")
	handler.wait(t, 5*time.Second, "attempt 1 answered", func(e event) bool {
		return e.str("event") == "answered" && e.str("id") == j.ID && e.num("attempt") == 1
	})
	require.NoError(t, holder.cmd.Process.Signal(syscall.SIGCONT))
	paused = false
	// The resumed dispatcher logs the attempt's end (at info, its first
	// line naming the job): refused as lost, or the job stopped there.
	waitLog(t, holder, "job_id="+j.ID, 20*time.Second)
	require.Equal(t, "running", c.job(t, j.ID).State, "attempt 1's late report changed nothing")
	s.open(t, gate+".a2")
	done := c.terminal(t, j.ID, 30*time.Second)
	require.Equal(t, "succeeded", done.State, "%+v", done.Error)
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, "done by "+im.Name+" at attempt 2\n", string(c.download(t, j.ID).body), "attempt 2's result, not the paused attempt's")
}

// holderOf is the dispatcher process holding job id's current attempt,
// from the worker name the attempt records.
func holderOf(t T, s *EndpointSuite, d *deployment, dispatchers []*proc, id string) *proc {
	t.Helper()
	attempts := s.jobAttempts(t, d, id)
	require.NotEmpty(t, attempts)
	worker := attempts[len(attempts)-1].Worker
	m := callerPID.FindStringSubmatch(worker)
	require.NotNil(t, m, "the attempt's worker %q names its process", worker)
	for _, p := range dispatchers {
		if strconv.Itoa(p.cmd.Process.Pid) == m[1] {
			return p
		}
	}
	t.Fatalf("the attempt of %s is held by none of the dispatcher processes (worker %s)", id, worker)
	return nil
}

// waitReady waits until d answers /readyz.
func waitReady(t T, d *deployment) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(d.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) || !d.serve.alive() {
			t.Fatalf("%s not ready (%v)\n%s", d.serve.name, err, tail(d.serve.stderr.String(), 8000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
