package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

var chartDir = filepath.Join("..", "helm", "jobgate")

// rendered is one object of the chart's output, as JSON, with where it
// came from.
type rendered struct {
	where      string
	kind, api  string
	name       string
	json       []byte
	deployment *appsv1.Deployment
	service    *corev1.Service
}

// render renders the chart with Helm's own engine (what helm template
// does, strict: a template reading a value that is not there fails) for
// the values file (empty: the chart's defaults) and extra values.
func render(t *testing.T, valuesFile string, extra map[string]any) ([]rendered, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	vals := map[string]any{}
	if valuesFile != "" {
		v, err := common.ReadValuesFile(filepath.Join(chartDir, valuesFile))
		require.NoError(t, err)
		vals = v
	}
	for k, v := range extra {
		vals[k] = v
	}
	rv, err := util.ToRenderValues(ch, vals, common.ReleaseOptions{Name: "jobgate", Namespace: "jobs", IsInstall: true}, common.DefaultCapabilities)
	require.NoError(t, err)
	out, err := engine.Engine{Strict: true}.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	files := make([]string, 0, len(out))
	for f := range out {
		files = append(files, f)
	}
	sort.Strings(files)
	var objs []rendered
	for _, f := range files {
		if !strings.HasSuffix(f, ".yaml") {
			continue
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(out[f], -1) {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
				continue
			}
			js, err := yaml.YAMLToJSON([]byte(doc))
			require.NoError(t, err, "%s #%d:\n%s", f, i, doc)
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal(js, &meta))
			objs = append(objs, rendered{where: fmt.Sprintf("%s #%d (%s %s)", f, i, meta.Kind, meta.Metadata.Name),
				kind: meta.Kind, api: meta.APIVersion, name: meta.Metadata.Name, json: js})
		}
	}
	return objs, nil
}

// strict decodes js into v refusing any field v's type lacks: a typo or a
// field at the wrong level fails here instead of being dropped by the API
// server.
func strict(js []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// decodeAll decodes every object into its k8s.io/api type, strictly, and
// checks what the chart promises of each.
func decodeAll(t *testing.T, objs []rendered) map[string]int {
	t.Helper()
	kinds := map[string]int{}
	for i := range objs {
		o := &objs[i]
		kinds[o.kind]++
		var err error
		switch o.kind {
		case "Deployment":
			require.Equal(t, "apps/v1", o.api, o.where)
			o.deployment = &appsv1.Deployment{}
			err = strict(o.json, o.deployment)
		case "Service":
			require.Equal(t, "v1", o.api, o.where)
			o.service = &corev1.Service{}
			err = strict(o.json, o.service)
		case "PersistentVolumeClaim":
			require.Equal(t, "v1", o.api, o.where)
			err = strict(o.json, &corev1.PersistentVolumeClaim{})
		case "PodDisruptionBudget":
			require.Equal(t, "policy/v1", o.api, o.where)
			var pdb policyv1.PodDisruptionBudget
			err = strict(o.json, &pdb)
			if err == nil {
				require.NotNil(t, pdb.Spec.Selector, o.where)
			}
		case "ServiceMonitor": // the Prometheus Operator's; not a k8s.io/api type
			require.Equal(t, "monitoring.coreos.com/v1", o.api, o.where)
			var sm struct {
				Spec struct {
					Selector  map[string]any   `json:"selector"`
					Endpoints []map[string]any `json:"endpoints"`
				} `json:"spec"`
			}
			require.NoError(t, json.Unmarshal(o.json, &sm), o.where)
			require.NotEmpty(t, sm.Spec.Endpoints, o.where)
		default:
			t.Fatalf("%s: a kind this test does not know", o.where)
		}
		require.NoError(t, err, "%s does not decode strictly:\n%s", o.where, o.json)
	}
	return kinds
}

// checkDeployments holds every Deployment to what jobgate needs: its
// command and settings exist, the probes ask a port the container has and
// the paths jobgate serves, resources are set, it runs as non-root, and a
// Service selects its pods.
func checkDeployments(t *testing.T, objs []rendered) []string {
	t.Helper()
	var commands []string
	for _, o := range objs {
		if o.deployment == nil {
			continue
		}
		d := o.deployment
		require.Equal(t, d.Spec.Selector.MatchLabels, pick(d.Spec.Template.Labels, d.Spec.Selector.MatchLabels), "%s: the selector matches its pods", o.where)
		require.NotNil(t, d.Spec.Template.Spec.SecurityContext.RunAsNonRoot, o.where)
		require.True(t, *d.Spec.Template.Spec.SecurityContext.RunAsNonRoot, o.where)
		require.Len(t, d.Spec.Template.Spec.Containers, 1, o.where)
		c := d.Spec.Template.Spec.Containers[0]
		checkCommand(t, o.where, c.Args)
		commands = append(commands, c.Args[0])
		var env []string
		for _, e := range c.Env {
			env = append(env, e.Name)
			if e.ValueFrom != nil {
				require.NotNil(t, e.ValueFrom.SecretKeyRef, "%s: %s comes from an existing Secret", o.where, e.Name)
			}
		}
		checkEnv(t, o.where, env)
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for what, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
			require.NotNil(t, p, "%s: %s probe", o.where, what)
			require.True(t, ports[p.HTTPGet.Port.StrVal], "%s: the %s probe asks a port the container has", o.where, what)
			require.Contains(t, []string{"/healthz", "/readyz"}, p.HTTPGet.Path, o.where)
		}
		require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path, o.where)
		require.False(t, c.Resources.Requests.Memory().IsZero(), "%s: memory requested", o.where)
		require.False(t, c.Resources.Limits.Memory().IsZero(), "%s: memory limited", o.where)
		for _, m := range c.VolumeMounts {
			found := false
			for _, v := range d.Spec.Template.Spec.Volumes {
				found = found || v.Name == m.Name
			}
			require.True(t, found, "%s mounts volume %s, which the pod lacks", o.where, m.Name)
		}
		selected := false
		for _, s := range objs {
			if s.service != nil && s.service.Spec.Selector != nil &&
				equal(pick(d.Spec.Template.Labels, s.service.Spec.Selector), s.service.Spec.Selector) {
				selected = true
				for _, p := range s.service.Spec.Ports {
					require.True(t, ports[p.TargetPort.StrVal], "%s: its Service's target port %s exists", o.where, p.TargetPort.StrVal)
				}
			}
		}
		require.True(t, selected, "%s: a Service selects its pods", o.where)
	}
	sort.Strings(commands)
	return commands
}

func pick(labels, keys map[string]string) map[string]string {
	out := map[string]string{}
	for k := range keys {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

func equal(a, b map[string]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// The chart's defaults (embedded mode): one serve pod on a claim of its
// own, never two at once.
func TestTheChartRendersAnEmbeddedSingleNode(t *testing.T) {
	objs, err := render(t, "", nil)
	require.NoError(t, err)
	kinds := decodeAll(t, objs)
	require.Equal(t, map[string]int{"Deployment": 1, "Service": 1, "PersistentVolumeClaim": 1}, kinds)
	require.Equal(t, []string{"serve"}, checkDeployments(t, objs))
	for _, o := range objs {
		if d := o.deployment; d != nil {
			require.EqualValues(t, 1, *d.Spec.Replicas, "serve locks its data dir")
			require.Equal(t, appsv1.RecreateDeploymentStrategyType, d.Spec.Strategy.Type, "the old pod lets go of the data dir first")
			env := map[string]string{}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			require.NotContains(t, env, "JOBGATE_NATS_URL", "embedded: no external NATS")
			require.Equal(t, "0.0.0.0:4222", env["JOBGATE_NATS_LISTEN"], "workers in other pods reach the embedded server")
		}
	}
}

// examples/external.yaml: the four components against an existing NATS
// cluster, each a Deployment with a PodDisruptionBudget and a Service, the
// credentials and TLS files from existing Secrets, a ServiceMonitor.
func TestTheChartRendersTheComponentsOnAnExternalCluster(t *testing.T) {
	objs, err := render(t, filepath.Join("examples", "external.yaml"), nil)
	require.NoError(t, err)
	kinds := decodeAll(t, objs)
	require.Equal(t, map[string]int{"Deployment": 4, "Service": 4, "PodDisruptionBudget": 4, "ServiceMonitor": 1}, kinds)
	require.Equal(t, []string{"dispatcher", "gateway", "notifier", "renderer"}, checkDeployments(t, objs))
	for _, o := range objs {
		d := o.deployment
		if d == nil {
			continue
		}
		env := map[string]string{}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
			if e.ValueFrom != nil {
				env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name
			}
		}
		require.Equal(t, "3", env["JOBGATE_NATS_REPLICAS"], o.where)
		require.Equal(t, "secret:jobgate-auth", env["JOBGATE_AUTH_SECRET"], o.where)
		require.Equal(t, "/etc/jobgate/nats/nats.creds", env["JOBGATE_NATS_CREDS"], o.where)
		require.Equal(t, "/etc/jobgate/nats-tls/ca.crt", env["JOBGATE_NATS_TLS_CA"], o.where)
		require.Equal(t, "720h", env["JOBGATE_JOB_TTL"], o.where)
	}

	// A value the chart needs is named when missing, and a setting jobgate
	// does not read is caught by the check.
	_, err = render(t, filepath.Join("examples", "external.yaml"), map[string]any{"nats": map[string]any{"url": ""}})
	require.ErrorContains(t, err, "nats.url")
}
