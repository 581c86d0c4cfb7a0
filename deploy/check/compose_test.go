package check

import (
	"context"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"
)

func loadCompose(t *testing.T, env []string) (*types.Project, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts, err := cli.NewProjectOptions([]string{filepath.Join("..", "compose", "compose.yaml")},
		cli.WithWorkingDirectory(filepath.Join("..", "compose")), cli.WithEnv(env), cli.WithName("jobgate"))
	require.NoError(t, err)
	return opts.LoadProject(ctx)
}

// The Compose file loads with compose-go (the Compose specification's own
// loader, as docker compose uses it): 3 NATS nodes with JetStream and each
// component of jobgate, every one with a health check; every command, flag
// and JOBGATE_* setting it passes is one jobgate has.
func TestTheComposeFileLoadsAndPassesOnlyJobgatesSettings(t *testing.T) {
	_, err := loadCompose(t, nil)
	require.ErrorContains(t, err, "JOBGATE_AUTH_SECRET", "the auth secret is required, never defaulted")

	p, err := loadCompose(t, []string{"JOBGATE_AUTH_SECRET=7c1d5e"})
	require.NoError(t, err)
	names := p.ServiceNames()
	sort.Strings(names)
	require.Equal(t, []string{"dispatcher", "gateway", "nats1", "nats2", "nats3", "notifier", "renderer"}, names)

	for _, n := range []string{"nats1", "nats2", "nats3"} {
		s := p.Services[n]
		require.NotNil(t, s.HealthCheck, n)
		require.Len(t, s.Volumes, 1, "%s keeps its JetStream store on a volume", n)
		require.NotNil(t, s.Environment["SERVER_NAME"], n)
	}
	for _, n := range []string{"gateway", "dispatcher", "notifier", "renderer"} {
		s := p.Services[n]
		where := "compose service " + n
		require.Equal(t, "jobgate:dev", s.Image, "%s: the image make image builds", where)
		require.Equal(t, []string{n}, []string(s.Command), where)
		checkCommand(t, where, s.Command)
		var env []string
		for k := range s.Environment {
			env = append(env, k)
		}
		checkEnv(t, where, env)
		require.Equal(t, "3", *s.Environment["JOBGATE_NATS_REPLICAS"], where)
		require.Equal(t, "7c1d5e", *s.Environment["JOBGATE_AUTH_SECRET"], where)
		require.NotNil(t, s.HealthCheck, where)
		test := []string(s.HealthCheck.Test)
		require.Equal(t, []string{"CMD", "jobgate"}, test[:2], "%s: the image has no shell", where)
		checkCommand(t, where+" healthcheck", test[2:])
		addr := "JOBGATE_OPS_ADDR"
		if n == "gateway" {
			addr = "JOBGATE_HTTP_ADDR"
		}
		require.NotNil(t, s.Environment[addr], "%s: the health check's port", where)
		require.True(t, slices.ContainsFunc(test, func(a string) bool { return len(a) > 7 && a[len(a)-7:] == "/readyz" }), where)
		for dep := range s.DependsOn {
			require.Equal(t, "service_healthy", s.DependsOn[dep].Condition, "%s waits for %s's health", where, dep)
		}
		require.Len(t, s.DependsOn, 3, where)
	}
}
