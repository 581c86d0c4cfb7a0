package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/jobgate/jobgate"

// services are the packages that run jobgate's work; they meet only through
// JetStream.
var services = []string{"gateway", "dispatcher", "renderer", "notifier"}

// natsClients are the packages a service must reach only through
// internal/natsjs.
var natsClients = []string{"github.com/nats-io/nats.go", "github.com/nats-io/nats.go/jetstream"}

// pending names services still allowed to import NATS directly, and why
// (none: the renderer is a pkg/worker worker like any user's).
var pending = map[string]string{}

type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string // of the non-test files
	Deps       []string // transitive, non-test
}

// listAll lists the module's packages (and the standard ones they import)
// with their imports, as the go command sees them; once per test binary.
var listAll = sync.OnceValues(func() (map[string]*pkg, error) {
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		pkgs[p.ImportPath] = &p
	}
})

func load(t *testing.T) map[string]*pkg {
	t.Helper()
	pkgs, err := listAll()
	require.NoError(t, err)
	require.Contains(t, pkgs, module+"/gateway", "go list saw the module")
	return pkgs
}

func TestServicesReachNATSOnlyThroughNatsjs(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	for _, svc := range services {
		t.Run(svc, func(t *testing.T) {
			p := pkgs[module+"/"+svc]
			require.NotNil(t, p, "service %s not found", svc)
			var direct []string
			for _, imp := range p.Imports {
				for _, n := range natsClients {
					if imp == n {
						direct = append(direct, imp)
					}
				}
			}
			if why, ok := pending[svc]; ok && len(direct) > 0 {
				t.Skipf("%s still imports %v directly: %s", svc, direct, why)
			}
			require.Empty(t, direct, "%s imports NATS directly; use (and extend) an adapter in internal/natsjs behind an interface the service declares", svc)
		})
	}
}

func TestServicesDoNotImportEachOther(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	for _, svc := range services {
		p := pkgs[module+"/"+svc]
		require.NotNil(t, p, "service %s not found", svc)
		for _, other := range services {
			if other == svc {
				continue
			}
			for _, dep := range p.Deps {
				require.False(t, dep == module+"/"+other || strings.HasPrefix(dep, module+"/"+other+"/"),
					"%s depends on %s (via %s); services meet only through JetStream", svc, other, dep)
			}
		}
	}
}

// assembled are the packages system builds from the provisioned
// resources: each takes the adapters it declares (its Stores), never
// natsjs.Resources whole, and only the assembly maps one to the other.
var assembled = []string{"gateway", "dispatcher", "notifier", "renderer", "internal/broker"}

func TestServicesTakeTheStoresTheyDeclare(t *testing.T) {
	t.Parallel()
	for _, dir := range assembled {
		t.Run(dir, func(t *testing.T) {
			for _, at := range resourcesMentions(t, "../../"+dir) {
				t.Errorf("%s: %s names natsjs.Resources; take the adapters the package declares (its Stores), mapped in system", at, dir)
			}
		})
	}
}

func TestAPIPackageIsStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	p := pkgs[module+"/pkg/api"]
	require.NotNil(t, p)
	for _, dep := range p.Deps {
		d := pkgs[dep]
		require.True(t, d != nil && d.Standard, "pkg/api depends on %s: it must stay standard library only", dep)
	}
}

// hiddenLeaves are the internal packages a user's client or worker links
// without seeing them (no exported name of a public package mentions one,
// TestPublicAPIMentionsOnlyTheAPI): small leaves of the standard library
// and, for the schema, the JSON Schema libraries a worker compiles with.
var hiddenLeaves = map[string]string{
	"/pkg/api":             "the public types",
	"/internal/canon":      "strict JSON and RFC 8785, for the client's journal fingerprint",
	"/internal/retry":      "backoff with jitter",
	"/internal/sse":        "the event-stream parser",
	"/internal/wire":       "the worker protocol's subjects and messages (docs/protocol.md)",
	"/internal/workerhook": "test hooks, empty in a user's build",
	"/internal/schema":     "a worker checks its schema as the gateway will before declaring it",
	"/internal/startstop":  "the one lifecycle of Start and Stop that every service has",
	"/internal/stdwebhook": "Standard Webhooks signatures, which pkg/endpoint verifies as jobgate makes them",
	"/internal/verdict":    "the failure a job's owner reads of a worker's report, which pkg/workertest shows as the broker records it",
}

// What a user's application or worker links of jobgate is the API and a few
// hidden leaves, never the record, the stores or a service: a change inside
// jobgate cannot reach a user's build.
func TestClientAndWorkerLinkOnlyTheAPIAndHiddenLeaves(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	light := []string{"/pkg/client", "/pkg/worker", "/pkg/endpoint", "/pkg/workertest"}
	for _, pub := range light {
		p := pkgs[module+pub]
		require.NotNil(t, p, pub)
		for _, dep := range p.Deps {
			if !strings.HasPrefix(dep, module+"/") {
				continue
			}
			_, ok := hiddenLeaves[strings.TrimPrefix(dep, module)]
			require.True(t, ok || slices.Contains(light, strings.TrimPrefix(dep, module)),
				"%s depends on %s: public packages link only pkg/api and the hidden leaves", pub, dep)
		}
	}
}

// No exported name of a public package mentions an internal type: what a
// user writes against is pkg/api, the standard library and the public
// packages themselves. pkg/workertest/jobgatetest runs jobgate in a test
// and so links all of it, but shows none of it.
func TestPublicAPIMentionsOnlyTheAPI(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	n := 0
	for path := range pkgs {
		if !strings.HasPrefix(path, module+"/pkg/") {
			continue
		}
		n++
		dir := strings.TrimPrefix(path, module+"/")
		for _, leak := range internalMentions(t, "../../"+dir) {
			t.Errorf("%s: %s", path, leak)
		}
	}
	require.GreaterOrEqual(t, n, 4, "the public packages were found")
}

func TestPublicPackagesDoNotDependOnTestHelpersOrTheBench(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	forbidden := []string{module + "/internal/bench", module + "/test/jobtest", module + "/test/clustertest", module + "/test/e2e"}
	n := 0
	for path, p := range pkgs {
		if !strings.HasPrefix(path, module+"/pkg/") {
			continue
		}
		n++
		for _, dep := range p.Deps {
			for _, f := range forbidden {
				require.False(t, dep == f || strings.HasPrefix(dep, f+"/"), "%s depends on %s", path, dep)
			}
		}
	}
	require.GreaterOrEqual(t, n, 2, "the public packages were found")
}

// The HTTP client is what an application imports to submit and follow jobs:
// it must not drag in NATS or the server's HTTP stack.
func TestClientStaysLight(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	p := pkgs[module+"/pkg/client"]
	require.NotNil(t, p)
	for _, dep := range p.Deps {
		for _, heavy := range []string{"github.com/nats-io/", "github.com/gofiber/", "github.com/valyala/fasthttp"} {
			require.False(t, strings.HasPrefix(dep, heavy), "pkg/client depends on %s", dep)
		}
		for _, svc := range services {
			require.False(t, dep == module+"/"+svc, "pkg/client depends on the %s service", svc)
		}
	}
}

// A team's web app imports pkg/endpoint beside its own routes: it links
// no NATS at all, nor the server's HTTP stack.
func TestEndpointPackageLinksNoNATS(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	p := pkgs[module+"/pkg/endpoint"]
	require.NotNil(t, p)
	for _, dep := range p.Deps {
		for _, heavy := range []string{"github.com/nats-io/", "github.com/gofiber/", "github.com/valyala/fasthttp"} {
			require.False(t, strings.HasPrefix(dep, heavy), "pkg/endpoint depends on %s", dep)
		}
	}
}

// A user's worker binary carries the worker protocol and a NATS client,
// never the NATS server nor jobgate's services.
func TestWorkerPackageLinksNoServer(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	p := pkgs[module+"/pkg/worker"]
	require.NotNil(t, p)
	for _, dep := range p.Deps {
		require.False(t, strings.HasPrefix(dep, "github.com/nats-io/nats-server"), "pkg/worker depends on %s", dep)
		require.False(t, strings.HasPrefix(dep, "github.com/nats-io/nats.go/jetstream"), "pkg/worker depends on %s: workers reach no stream", dep)
		for _, inner := range []string{"/internal/natsjs", "/internal/natsserver", "/internal/broker", "/gateway", "/dispatcher", "/notifier", "/renderer"} {
			require.False(t, dep == module+inner, "pkg/worker depends on %s", dep)
		}
	}
}

// The JetStream adapters are a NATS client's: the embedded server and who
// may log in to it live in internal/natsserver, so what connects to an
// operator's NATS (a component, a tool on internal/natsjs) links no server.
func TestAdaptersLinkNoServer(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	p := pkgs[module+"/internal/natsjs"]
	require.NotNil(t, p)
	for _, dep := range p.Deps {
		require.False(t, dep == "github.com/nats-io/nats-server/v2" || strings.HasPrefix(dep, "github.com/nats-io/nats-server/v2/"),
			"internal/natsjs depends on %s: the embedded server and its logins belong in internal/natsserver", dep)
	}
}

// A handler's unit test imports pkg/workertest: it runs one attempt in
// process, so it links no NATS server, nor the gateway's HTTP stack, the
// admin index or the mailer; the whole jobgate a test can start lives in
// pkg/workertest/jobgatetest (go list -deps ./pkg/workertest shows none of
// them).
func TestWorkertestLinksNoServer(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	p := pkgs[module+"/pkg/workertest"]
	require.NotNil(t, p)
	for _, heavy := range serverSide(p.Deps) {
		t.Errorf("pkg/workertest depends on %s: a handler's unit test links no server; put what needs it in pkg/workertest/jobgatetest", heavy)
	}
}

// serverSide are the deps among deps that only a running jobgate needs:
// the NATS server, Fiber (and fasthttp under it), bbolt and go-mail.
func serverSide(deps []string) []string {
	var out []string
	for _, dep := range deps {
		for _, heavy := range []string{"github.com/nats-io/nats-server/", "github.com/gofiber/", "github.com/valyala/fasthttp", "go.etcd.io/bbolt", "github.com/wneessen/go-mail"} {
			if strings.HasPrefix(dep+"/", heavy) {
				out = append(out, dep)
			}
		}
	}
	return out
}
