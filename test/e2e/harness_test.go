package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/renderer"
	jgsystem "github.com/jobgate/jobgate/system"
	"github.com/stretchr/testify/require"
)

// system is jobgate as `jobgate serve --dev` runs it, in-process through
// system: embedded JetStream, notifier, dispatcher, renderer and a
// gateway in development mode on a free port.
type system struct {
	url    string
	sys    *jgsystem.System
	res    *natsjs.Resources
	secret []byte
	gate   *renderGate
	logs   *logBuffer
	// dataDir is the system's data dir (its mail outbox is outbox/ in it).
	dataDir string
}

// renderGate holds every render at its start until the test opens it, so a
// test can act while a job is running (reload the page mid-render) without
// sleeping or depending on how fast a PDF renders. The renderer keeps the
// job's heartbeat going meanwhile, as it does during a long render.
type renderGate struct {
	started chan string
	release chan struct{}
	once    sync.Once
}

func newRenderGate(open bool) *renderGate {
	g := &renderGate{started: make(chan string, 16), release: make(chan struct{})}
	if open {
		g.open()
	}
	return g
}

func (g *renderGate) hold(_ context.Context, r *job.Record) {
	select {
	case g.started <- r.ID:
	default:
	}
	select {
	case <-g.release:
	case <-time.After(2 * time.Minute): // a failed test must not wedge the renderer for ever
	}
}

func (g *renderGate) open() { g.once.Do(func() { close(g.release) }) }

// logBuffer keeps the system's logs; they are printed only when a test fails.
type logBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// startSystem starts the whole system in a temp dir. With heldRenders, every
// render waits at its start until sys.gate.open(); tune adjusts the
// renderer's settings.
func startSystem(t *testing.T, heldRenders bool, tune ...func(*renderer.Config)) *system {
	t.Helper()
	return startSystemWith(t, heldRenders, nil, tune...)
}

// startSystemWith is startSystem with edit applied to the settings.
func startSystemWith(t *testing.T, heldRenders bool, edit func(*config.Config), tune ...func(*renderer.Config)) *system {
	t.Helper()
	chromiumPath(t) // every system here is driven by a browser: skip before starting anything
	sys := &system{secret: []byte("e2e-secret"), gate: newRenderGate(!heldRenders), logs: &logBuffer{}}
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr, settings.AuthSecret, settings.Dev = t.TempDir(), "127.0.0.1:0", string(sys.secret), true
	if edit != nil {
		edit(&settings)
	}
	sys.dataDir = settings.DataDir
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var err error
	sys.sys, err = jgsystem.Start(ctx, jgsystem.Config{Settings: &settings, LogOutput: sys.logs,
		Renderer: func(c *renderer.Config) {
			c.OnRender, c.DrainTimeout = sys.gate.hold, time.Second
			for _, f := range tune {
				f(c)
			}
		}})
	require.NoError(t, err, "%s", sys.logs)
	sys.url, sys.res = sys.sys.URL(), sys.sys.Resources()

	t.Cleanup(func() {
		sys.gate.open()
		require.NoError(t, sys.sys.Stop(context.Background()))
		if t.Failed() {
			t.Logf("system logs:\n%s", sys.logs.String())
		}
	})
	return sys
}

// token mints a bearer token the way `jobgate token` does.
func (s *system) token(t *testing.T, tenant, subject string) string {
	t.Helper()
	tok, err := auth.Mint(s.secret, auth.Identity{Tenant: tenant, Requester: subject}, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

// listJobs is GET /v1/jobs as the given requester: what the server holds
// for them.
func (s *system) listJobs(t *testing.T, tok string) []job.Resource {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+"/v1/jobs?limit=100", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET /v1/jobs: %s", body)
	var page struct {
		Jobs []job.Resource `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(body, &page))
	return page.Jobs
}

// skipBrowser decides on JOBGATE_SKIP_BROWSER: skip (with the reason) on a
// developer's machine, but a CI run (CI=true, as GitHub Actions, GitLab and
// most CI services set it) must prove the page works, so there it is an
// error rather than a silent pass.
func skipBrowser(getenv func(string) string) (reason string, err error) {
	if getenv("JOBGATE_SKIP_BROWSER") != "1" {
		return "", nil
	}
	if ci := strings.ToLower(getenv("CI")); ci == "true" || ci == "1" {
		return "", errors.New("JOBGATE_SKIP_BROWSER=1 is not allowed under CI=true: the browser test of the reviewer's page must run in CI")
	}
	return "JOBGATE_SKIP_BROWSER=1: skipping the browser test of the reviewer's page", nil
}

// chromiumPath finds Debian's chromium (or another Chrome) for the test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	reason, err := skipBrowser(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if reason != "" {
		t.Skip(reason)
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the browser test needs Chromium: install it (apt-get install -y chromium; .ci/run does this) " +
		"or set JOBGATE_SKIP_BROWSER=1 to skip it")
	return ""
}

// page is one browser tab on the system, with downloads going to a temp dir.
type page struct {
	ctx       context.Context // run actions with this one: it carries the test's deadline
	downloads string
	net       *netLog // set by recordNetwork
}

// openBrowser starts a fresh headless Chromium (new empty profile) and
// returns its first tab.
func openBrowser(t *testing.T) *page {
	t.Helper()
	exe := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	// The first run starts the browser; it must not carry a deadline.
	require.NoError(t, chromedp.Do(browserCtx), "start chromium")
	dir := t.TempDir()
	_, err := chromedp.CallBrowser(browserCtx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior:      browser.SetDownloadBehaviorBehaviorAllowAndName,
		DownloadPath:  dir,
		EventsEnabled: new(true),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(browserCtx, 3*time.Minute)
	t.Cleanup(cancel)
	return &page{ctx: ctx, downloads: dir}
}
