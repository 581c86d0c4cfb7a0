package system_test

import (
	"context"
	"github.com/jobgate/jobgate/test/jobtest"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/system"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

type syncBuffer = jobtest.SyncBuffer

// probe is a worker of the test's: at its stop it records whether the
// gateway still answered and whether the broker still did.
type probe struct {
	url       string
	nc        *nats.Conn
	gatewayUp bool
	stopped   bool
}

func (p *probe) Start(context.Context) error { return nil }

func (p *probe) Stop(context.Context) error {
	resp, err := http.Get(p.url + "/healthz")
	if err == nil {
		resp.Body.Close()
		p.gatewayUp = true
	}
	p.stopped = true
	return nil
}

// Start runs serve's four components from one Config and Stop ends them
// gateway first, then the workers, then the dispatcher, then the notifier.
func TestStartsEverythingAndStopsGatewayFirst(t *testing.T) {
	t.Parallel()
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr = t.TempDir(), "127.0.0.1:0"
	logs := &syncBuffer{}
	p := &probe{}
	var sys *system.System
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: logs,
		Workers: []system.WorkerFunc{func(s *system.System, nc *nats.Conn) (system.Service, error) {
			p.nc = nc
			return p, nil
		}}})
	require.NoError(t, err)
	p.url = sys.URL()
	require.True(t, strings.HasPrefix(sys.URL(), "http://127.0.0.1:"), sys.URL())
	require.NotEqual(t, "http://127.0.0.1:0", sys.URL(), "the port bound")

	resp, err := http.Get(sys.URL() + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	tok, err := sys.Token(auth.Identity{Tenant: "4", Requester: "r"}, time.Minute)
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodGet, sys.URL()+"/v1/types/permit_report", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the renderer declared permit_report before the gateway started")

	_, err = sys.WorkerCredentials("greeting")
	require.Error(t, err, "no listener, no worker credentials")

	require.NoError(t, sys.Stop(context.Background()))
	require.True(t, p.stopped)
	require.False(t, p.gatewayUp, "the gateway stopped before the workers")
	out := logs.String()
	worker := strings.Index(out, `msg="worker stopped"`)
	disp := strings.Index(out, `msg="dispatcher stopped"`)
	notif := strings.Index(out, `msg="notifier stopped"`)
	require.True(t, worker >= 0 && disp > worker && notif > disp, "workers, dispatcher, notifier in that order:\n%s", out)
	require.True(t, p.nc.IsClosed(), "a worker's connection is closed by Stop")

	// The data dir's lock is dropped: another system starts on it.
	again, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: logs, Components: []system.Component{system.Dispatcher}})
	require.NoError(t, err)
	require.NoError(t, again.Stop(context.Background()))
}

// With the embedded server listening, WorkerCredentials are those of
// `jobgate nats-user --worker`: they log in, for their types only.
func TestWorkerCredentialsLogIn(t *testing.T) {
	t.Parallel()
	settings := config.Default()
	settings.DataDir, settings.NATS.Listen = t.TempDir(), "127.0.0.1:-1"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: &syncBuffer{},
		Components: []system.Component{system.Dispatcher}})
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.Stop(context.Background())) }()
	require.Empty(t, sys.URL(), "no gateway")
	_, err = sys.Token(auth.Identity{Tenant: "4", Requester: "r"}, time.Minute)
	require.Error(t, err)

	creds, err := sys.WorkerCredentials("greeting")
	require.NoError(t, err)
	require.Equal(t, sys.NATSURL(), creds.URL)
	require.Equal(t, "jgw.greeting", creds.User)
	nc, err := nats.Connect(creds.URL, nats.UserInfo(creds.User, creds.Password))
	require.NoError(t, err)
	nc.Close()
	_, err = nats.Connect(creds.URL, nats.UserInfo(creds.User, "wrong"))
	require.Error(t, err)
}

// A second system on a data dir in use fails at once, naming the lock.
func TestSecondSystemOnOneDataDirFails(t *testing.T) {
	t.Parallel()
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr = t.TempDir(), "127.0.0.1:0"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	one := []system.Component{system.Dispatcher}
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: &syncBuffer{}, Components: one})
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.Stop(context.Background())) }()
	_, err = system.Start(ctx, system.Config{Settings: &settings, LogOutput: &syncBuffer{}, Components: one})
	require.ErrorContains(t, err, "LOCK")
}
