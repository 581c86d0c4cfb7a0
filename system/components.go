package system

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/gateway"
	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/tenantquota"
	"github.com/jobgate/jobgate/notifier"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/renderer"
	"github.com/nats-io/nats.go"
)

// Each component is built from the settings here, and only here; the finer
// knobs a setting does not name keep the component's own defaults.

// newDispatcher builds the dispatcher: relay, indexer, sweeper and the
// broker that answers the workers, with the batch relay beside it
// (batches.go).
func (s *System) newDispatcher(res *natsjs.Resources, adjust func(*dispatcher.Config)) (Service, error) {
	c := &s.settings
	dc := dispatcher.Config{
		MaxAttempts:   c.MaxAttempts,
		RenderTimeout: c.RenderTimeout,
		Metrics:       s.metrics,
		Broker: broker.Config{
			MaxAttempts:         c.MaxAttempts,
			TenantWeights:       c.Renderer.TenantWeights,
			TenantMaxRunning:    c.Renderer.TenantMaxRunning,
			TenantMaxRunningFor: c.Renderer.TenantMaxRunningFor,
			// Each tenant's result quota, enforced as results are stored.
			TenantResultsMaxBytes: c.TenantResultsMaxBytes,
			ResultQuota:           s.quota, // nil unless the gateway runs here too
			OnResultQuotaFull:     func() { s.metrics.TenantResultsFull("upload") },
		},
	}
	if adjust != nil {
		adjust(&dc)
	}
	d, err := dispatcher.New(dc, DispatcherStores(res), s.log.With("service", "dispatcher"))
	if err != nil {
		return nil, err
	}
	withBatches, err := s.withBatchRelay(d, res)
	if err != nil {
		return nil, err
	}
	return s.withEndpointCaller(withBatches, res)
}

// newRenderer builds the renderer (the permit_report worker) on nc, with
// jobgate's own credential.
func (s *System) newRenderer(nc *nats.Conn, adjust func(*renderer.Config)) (*renderer.Renderer, error) {
	c := &s.settings
	rc := renderer.Config{
		Concurrency:    c.Renderer.Concurrency,
		MaxAttempts:    c.MaxAttempts,
		RenderTimeout:  c.RenderTimeout,
		MaxOutputBytes: c.Renderer.MaxOutputBytes,
		Failpoints:     s.fp,
		Metrics:        s.metrics,
	}
	if adjust != nil {
		adjust(&rc)
	}
	return renderer.New(rc, worker.Config{Conn: nc, Logger: s.log.With("service", "renderer")})
}

// newNotifier builds the notifier. Without an SMTP host, mails land as .eml
// files in <data dir>/outbox.
func (s *System) newNotifier(res *natsjs.Resources) (*notifier.Notifier, error) {
	c := s.settings.Notifier
	host, _ := os.Hostname()
	base := "http://" + s.settings.HTTPAddr
	if s.listener != nil {
		base = s.URL() // the port bound, also when HTTPAddr asked for any
	}
	cfg := notifier.Config{
		Webhooks:     map[string][]notifier.Webhook{},
		AllowPrivate: c.AllowPrivateWebhooks,
		Retries:      c.WebhookRetries,
		Mail: notifier.Mail{
			Host: c.Mail.SMTPHost, Port: c.Mail.SMTPPort, Username: c.Mail.Username, Password: c.Mail.Password,
			From: c.Mail.From, Addresses: c.Mail.Addresses, Outbox: s.settings.Path("outbox"),
		},
		MaxPendingPerDestination: c.MaxPendingPerDestination,
		DestinationConcurrency:   c.DestinationConcurrency,
		Instance:                 fmt.Sprintf("%s-%d", host, os.Getpid()),
		BaseURL:                  base,
		ResultTTL:                s.settings.ResultTTL,
		Metrics:                  s.metrics,
	}
	for tenant, hooks := range c.Webhooks {
		for _, h := range hooks {
			w := notifier.Webhook{URL: h.URL, Secret: h.Secret}
			for _, st := range h.States {
				w.States = append(w.States, job.State(st))
			}
			cfg.Webhooks[tenant] = append(cfg.Webhooks[tenant], w)
		}
	}
	return notifier.New(cfg, NotifierStores(res), s.log.With("service", "notifier"))
}

// indexDir keeps the gateway's query index in the data dir, so a restart
// resumes it instead of rebuilding it from the whole change log.
func indexDir(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	return filepath.Join(dataDir, "index")
}

// newGateway builds the HTTP gateway on the listener claimed first.
func (s *System) newGateway(res *natsjs.Resources, nc *nats.Conn) (*gateway.Gateway, error) {
	c := &s.settings
	return gateway.New(gateway.Config{
		Addr:                     c.HTTPAddr,
		Listener:                 s.listener,
		AuthSecret:               s.secret,
		AuthAudience:             c.AuthAudience,
		AuthIssuer:               c.AuthIssuer,
		LinkTTL:                  c.ResultLinkTTL,
		ReadRate:                 c.Gateway.ReadRate,
		ReadBurst:                c.Gateway.ReadBurst,
		SubmitRate:               c.Gateway.SubmitRate,
		SubmitBurst:              c.Gateway.SubmitBurst,
		LeaveWorkToRelay:         c.Gateway.LeaveWorkToRelay,
		MaxStreamsPerRequester:   c.Gateway.MaxStreamsPerRequester,
		MaxLongPollsPerRequester: c.Gateway.MaxLongPollsPerRequester,
		MaxStreamsPerTenant:      c.Gateway.MaxStreamsPerTenant,
		MaxLongPollsPerTenant:    c.Gateway.MaxLongPollsPerTenant,
		MaxStreams:               c.Gateway.MaxStreams,
		MaxLongPolls:             c.Gateway.MaxLongPolls,
		StreamWriteTimeout:       c.Gateway.StreamWriteTimeout,
		Dev:                      c.Dev,
		Endpoints:                c.EndpointPolicy(),
		Failpoints:               s.fp,
		Metrics:                  s.metrics,
		MetricsToken:             c.MetricsToken,
		IndexDir:                 indexDir(c.DataDir),
		TenantResultsMaxBytes:    c.TenantResultsMaxBytes,
		ResultQuota:              s.quota, // nil unless the dispatcher runs here too
		Callbacks:                natsjs.NewCallbackRelay(nc),
	}, GatewayStores(res), s.log.With("component", "gateway"))
}

// startQuota makes, when the gateway and the dispatcher run in this
// process, the one tally of the tenants' stored result bytes that both
// count on (Config.ResultQuota of the gateway and the broker): one listing
// of every result object a reading instead of one each. It reads on the
// process's connection until Stop (stopQuota). A component run alone
// makes its own.
func (s *System) startQuota() error {
	if !s.run[Gateway] || !s.run[Dispatcher] {
		return nil
	}
	maxBytes := s.settings.TenantResultsMaxBytes
	q, err := tenantquota.New(tenantquota.Config{MaxBytes: maxBytes, Read: s.res.TenantUse, Log: s.log.With("component", "tenantquota"),
		OnRead: gateway.ResultQuotaMetrics(s.metrics, maxBytes)})
	if err != nil {
		return fmt.Errorf("result quota: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(ctx)
	}()
	s.quota = q
	s.stopQuota = func() {
		cancel()
		<-done // a reading under way ends with ctx
	}
	return nil
}
