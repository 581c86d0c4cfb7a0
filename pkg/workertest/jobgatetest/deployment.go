package jobgatetest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/system"
)

// Deployment is a whole jobgate running in this process, as `jobgate serve
// --nats-listen` runs it: an embedded NATS server with JetStream in a temp
// data dir, listening on a free loopback port for worker processes and
// event subscribers, the dispatcher (whose broker checks every worker
// request), the renderer, the notifier and the gateway on a free loopback
// port. Settings are serve's defaults, rate limits included.
type Deployment struct {
	sys  *system.System
	dir  string
	logs *logBuffer
}

// Start starts a deployment for the test t and stops it when t ends; its
// logs are printed when t failed. It fails t if the deployment does not
// start.
func Start(t testing.TB) *Deployment {
	t.Helper()
	return StartWith(t, Options{})
}

// Options shape a deployment beyond serve's defaults.
type Options struct {
	// Webhooks are the webhook endpoints per tenant id; loopback URLs are
	// allowed (a test's receiver runs on one).
	Webhooks map[string][]Webhook
	// LoopbackEndpoints lets endpoint types' URLs name loopback addresses,
	// where a test's handler runs (JOBGATE_ENDPOINT_ALLOW=127.0.0.0/8,::1/128).
	LoopbackEndpoints bool
}

// Webhook is one endpoint: deliveries are signed with Secret (Standard
// Webhooks: "whsec_" + base64, or raw).
type Webhook struct {
	URL, Secret string
	// States, if set, limits deliveries to events of these job states
	// (e.g. succeeded, failed, canceled).
	States []string
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Deployment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := NewDeploymentWith(ctx, o)
	if err != nil {
		t.Fatalf("jobgatetest: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Stop(context.Background()); err != nil {
			t.Errorf("jobgatetest: %v", err)
		}
		if t.Failed() {
			t.Logf("jobgate's logs:\n%s", d.Logs())
		}
	})
	return d
}

// NewDeployment starts a deployment outside a test's scope (a TestMain
// sharing one among a package's tests); Stop ends it and removes its data.
func NewDeployment(ctx context.Context) (*Deployment, error) {
	return NewDeploymentWith(ctx, Options{})
}

// NewDeploymentWith is NewDeployment with options.
func NewDeploymentWith(ctx context.Context, o Options) (*Deployment, error) {
	dir, err := os.MkdirTemp("", "jobgate-jobgatetest-")
	if err != nil {
		return nil, fmt.Errorf("jobgatetest: %w", err)
	}
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr, settings.NATS.Listen = dir, "127.0.0.1:0", "127.0.0.1:-1"
	if len(o.Webhooks) > 0 {
		settings.Notifier.Webhooks = map[string][]config.Webhook{}
		for tenant, hooks := range o.Webhooks {
			for _, h := range hooks {
				settings.Notifier.Webhooks[tenant] = append(settings.Notifier.Webhooks[tenant], config.Webhook{URL: h.URL, Secret: h.Secret, States: h.States})
			}
		}
		settings.Notifier.AllowPrivateWebhooks = true
		// A test waits for redeliveries in moments, not minutes.
		settings.Notifier.WebhookRetries = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}
	}
	if o.LoopbackEndpoints {
		settings.EndpointAllow = "127.0.0.0/8,::1/128"
	}
	d := &Deployment{dir: dir, logs: &logBuffer{}}
	d.sys, err = system.Start(ctx, system.Config{Settings: &settings, LogOutput: d.logs})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("jobgatetest: start jobgate: %w\n%s", err, d.logs.String())
	}
	return d, nil
}

// Stop stops the deployment (the gateway first, as serve does on SIGTERM)
// and removes its data dir.
func (d *Deployment) Stop(ctx context.Context) error {
	err := d.sys.Stop(ctx)
	if rerr := os.RemoveAll(d.dir); err == nil && rerr != nil {
		err = rerr
	}
	return err
}

// URL is the gateway's base URL, e.g. http://127.0.0.1:40123: what
// pkg/client.New takes.
func (d *Deployment) URL() string { return d.sys.URL() }

// NATSURL is the embedded NATS server's URL, where worker processes and
// event subscribers connect.
func (d *Deployment) NATSURL() string { return d.sys.NATSURL() }

// Logs are jobgate's logs so far.
func (d *Deployment) Logs() string { return d.logs.String() }

// Token mints a bearer token (valid for an hour) for the requester of the
// tenant, as `jobgate token --tenant T --subject S` does. Ids match
// [A-Za-z0-9_-]{1,64}.
func (d *Deployment) Token(tenant, requester string) (string, error) {
	return d.sys.Token(auth.Identity{Tenant: tenant, Requester: requester}, time.Hour)
}

// OperatorToken mints an operator's bearer token (valid for an hour), as
// `jobgate token --operator --subject S` does: what declaring an endpoint
// type (PUT /v1/admin/types/{name}) takes.
func (d *Deployment) OperatorToken(subject string) (string, error) {
	return d.sys.Token(auth.Identity{Operator: true, Requester: subject}, time.Hour)
}

// Credentials log a worker process in to the deployment's NATS.
type Credentials struct {
	URL, User, Password string
}

// Config is a worker.Config with these credentials.
func (c Credentials) Config() worker.Config {
	return worker.Config{URL: c.URL, User: c.User, Password: c.Password}
}

// WorkerCredentials are the credentials `jobgate nats-user --worker --type
// T [--type U ...]` prints for types: they let a worker process declare
// and run those types and nothing else, through jobgate's checks.
func (d *Deployment) WorkerCredentials(types ...string) (Credentials, error) {
	c, err := d.sys.WorkerCredentials(types...)
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{URL: c.URL, User: c.User, Password: c.Password}, nil
}

// WaitForType waits, within ctx, until the gateway admits jobs of the type
// (GET /v1/types/{name} answers): a worker's Start returns once jobgate
// stored its declaration, and the gateway takes it a moment later.
func (d *Deployment) WaitForType(ctx context.Context, name string) error {
	tok, err := d.sys.Token(auth.Identity{Tenant: "jobgatetest", Requester: "jobgatetest"}, time.Hour)
	if err != nil {
		return err
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL()+"/v1/types/"+url.PathEscape(name), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jobgatetest: type %s not admitted: %w", name, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond): // within the read rate limit (20/s)
		}
	}
}

// logBuffer keeps jobgate's logs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
