package conformance

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/childproc"
	"github.com/stretchr/testify/require"
)

// endpointSpec is the endpoint types every conformance handler serves
// (docs/conformance.md, "Endpoint types"): one params schema, and per kind
// its limits.
//
//go:embed testdata/endpoint_types.json
var endpointSpec []byte

// endpointAllow lets the deployments call handlers on loopback
// (JOBGATE_ENDPOINT_ALLOW): the handlers under test listen there.
const endpointAllow = "JOBGATE_ENDPOINT_ALLOW=127.0.0.0/8"

// endpointKinds are the kinds of the spec a handler's main process serves;
// the kill kind is served in the dispatcher-killed deployment.
var endpointKinds = []string{"work", "timeout", "small", "late"}

type endpointKind struct {
	TimeoutSeconds int    `json:"timeout_seconds"`
	Attempts       int    `json:"attempts"`
	MaxResultBytes int64  `json:"max_result_bytes"`
	ContentType    string `json:"content_type"`
	Concurrency    int    `json:"concurrency"`
}

// EndpointSuite is what the endpoint scenarios share: a deployment (`serve`
// allowing loopback endpoints), the gates, an operator's token.
type EndpointSuite struct {
	d        *deployment
	gates    string
	operator string
	schema   json.RawMessage
	kinds    map[string]endpointKind
}

// EndpointImpl is one implementation of an endpoint handler under test: a
// command that starts a handler process (`sh -c "exec <command>"` in Dir)
// listening on the port it is given.
type EndpointImpl struct {
	// Name prefixes its types and is what its handlers write ("done by
	// <name> at attempt 2"): [a-z][a-z0-9]{0,15}.
	Name         string
	Command, Dir string
	handler      *proc
}

// NewEndpointSuite starts `<jobgate> serve` on free loopback ports, in a
// temp dir, with loopback endpoints allowed.
func NewEndpointSuite(t T, jobgate string) *EndpointSuite {
	t.Helper()
	s := &EndpointSuite{gates: filepath.Join(t.TempDir(), "gates")}
	require.NoError(t, os.MkdirAll(s.gates, 0o755))
	var spec struct {
		Schema json.RawMessage         `json:"schema"`
		Types  map[string]endpointKind `json:"types"`
	}
	require.NoError(t, json.Unmarshal(endpointSpec, &spec))
	s.schema, s.kinds = spec.Schema, spec.Types
	s.d = startDeployment(t, jobgate, endpointAllow)
	s.operator = strings.TrimSpace(string(s.d.jobgate(t, "token", "--operator", "--subject", "conformance")))
	return s
}

func (s *EndpointSuite) open(t T, gate string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(s.gates, gate), nil, 0o644))
}

// declare declares im's endpoint types of kinds on d, each at
// <handler>/<type>, and returns each type's path and its secrets, as the
// handler reads them (CONF_SECRETS).
func (s *EndpointSuite) declare(t T, d *deployment, handler string, im *EndpointImpl, kinds ...string) map[string][]string {
	t.Helper()
	op := &client{d: d, token: s.operator}
	if d != s.d {
		op.token = strings.TrimSpace(string(d.jobgate(t, "token", "--operator", "--subject", "conformance")))
	}
	secrets := map[string][]string{}
	for _, kind := range kinds {
		k, ok := s.kinds[kind]
		require.True(t, ok, "kind %s of the spec", kind)
		name := im.Name + "_" + kind
		body, err := json.Marshal(map[string]any{
			"description": "conformance: " + kind, "schema": s.schema, "timeout_seconds": k.TimeoutSeconds, "attempts": k.Attempts,
			"max_result_bytes": k.MaxResultBytes, "content_type": k.ContentType,
			"endpoint": map[string]any{"url": handler + "/" + name, "concurrency": k.Concurrency},
		})
		require.NoError(t, err)
		r := op.do(t, http.MethodPut, "/v1/admin/types/"+name, string(body))
		require.Equal(t, http.StatusCreated, r.status, "declare %s: %s", name, r.body)
		var created struct {
			Endpoint struct {
				Secret string `json:"secret"`
			} `json:"endpoint"`
		}
		require.NoError(t, json.Unmarshal(r.body, &created))
		require.True(t, strings.HasPrefix(created.Endpoint.Secret, "whsec_"), "the secret shown on creation: %s", r.body)
		secrets["/"+name] = []string{created.Endpoint.Secret}
	}
	return secrets
}

// startHandler declares im's types of kinds on d and starts a handler
// process of im serving them on a free loopback port.
func (s *EndpointSuite) startHandler(t T, d *deployment, im *EndpointImpl, pname string, kinds ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	secrets := s.declare(t, d, "http://"+addr, im, kinds...)
	data, err := json.Marshal(secrets)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "secrets.json")
	require.NoError(t, os.WriteFile(file, data, 0o600))
	p := start(t, pname, im.Dir, childproc.Env("CONF_PORT="+port, "CONF_SECRETS="+file, "CONF_LABEL="+im.Name, "CONF_GATES="+s.gates),
		"/bin/sh", "-c", "exec "+im.Command)
	p.wait(t, 30*time.Second, "ready", eventOf("ready", ""))
	return p
}

// StartHandler starts im's main handler process, serving its types of the
// main kinds on the suite's serve.
func (s *EndpointSuite) StartHandler(t T, im *EndpointImpl) {
	t.Helper()
	im.handler = s.startHandler(t, s.d, im, im.Name+"-handler", endpointKinds...)
}

// EndpointScenario is one check of jobgate calling a handler.
type EndpointScenario struct {
	Name string
	Run  func(t T, s *EndpointSuite, im *EndpointImpl)
}

// EndpointScenarioNames lists the scenarios, for usage messages.
func EndpointScenarioNames() string {
	names := make([]string, len(EndpointScenarios))
	for i, sc := range EndpointScenarios {
		names[i] = sc.Name
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// jobAttempts reads a job's attempts as an operator sees them.
func (s *EndpointSuite) jobAttempts(t T, d *deployment, id string) []struct {
	Attempt int    `json:"attempt"`
	Worker  string `json:"worker"`
	Outcome string `json:"outcome"`
} {
	t.Helper()
	op := &client{d: d, token: strings.TrimSpace(string(d.jobgate(t, "token", "--operator", "--subject", "conformance")))}
	r := op.do(t, http.MethodGet, "/v1/admin/jobs/"+id, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var j struct {
		Attempts []struct {
			Attempt int    `json:"attempt"`
			Worker  string `json:"worker"`
			Outcome string `json:"outcome"`
		} `json:"attempts"`
	}
	require.NoError(t, json.Unmarshal(r.body, &j))
	return j.Attempts
}

// EndpointConfig is what RunEndpoints needs.
type EndpointConfig struct {
	// Jobgate is the jobgate binary the deployments run.
	Jobgate string
	// HandlerCmd starts a handler process of the implementation under
	// test (docs/conformance.md says what it must do); Dir is where it
	// runs.
	HandlerCmd, Dir string
	// Name prefixes the implementation's types; "h" if empty.
	Name string
	// Only runs the scenarios of these names (all if empty).
	Only []string
	// Out receives one line per scenario and, last, "N passed, M failed".
	Out io.Writer
}

// RunEndpoints drives an endpoint handler implementation through the
// endpoint scenarios against deployments of its own and reports each, as
// Run does for a worker.
func RunEndpoints(ctx context.Context, cfg EndpointConfig) (passed, failed int, err error) {
	if cfg.Name == "" {
		cfg.Name = "h"
	}
	if !implName.MatchString(cfg.Name) {
		return 0, 0, fmt.Errorf("conformance: name %q must match %s", cfg.Name, implName)
	}
	if strings.TrimSpace(cfg.HandlerCmd) == "" {
		return 0, 0, fmt.Errorf("conformance: no handler command")
	}
	var scenarios []EndpointScenario
	for _, sc := range EndpointScenarios {
		if len(cfg.Only) == 0 || slices.Contains(cfg.Only, sc.Name) {
			scenarios = append(scenarios, sc)
		}
	}
	if len(scenarios) == 0 {
		return 0, 0, fmt.Errorf("conformance: no endpoint scenario named %v (%s)", cfg.Only, EndpointScenarioNames())
	}
	began := time.Now()
	var suite *EndpointSuite
	im := &EndpointImpl{Name: cfg.Name, Command: cfg.HandlerCmd, Dir: cfg.Dir}
	setup := runUntilDone(func(t T) {
		suite = NewEndpointSuite(t, cfg.Jobgate)
		suite.StartHandler(t, im)
	})
	defer setup.finish()
	if setup.Failed() {
		return 0, 0, fmt.Errorf("conformance: setting up: %s", strings.Join(append(setup.errors, setup.logs...), "\n"))
	}
	fmt.Fprintf(cfg.Out, "deployment and %s's handler ready after %s\n", cfg.Name, time.Since(began).Round(time.Millisecond))
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.Name
	}
	return report(ctx, cfg.Out, names, func(i int, t T) { scenarios[i].Run(t, suite, im) })
}
