package gateway

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/egress"
	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/tenantquota"
	"github.com/jobgate/jobgate/pkg/api"
)

// Config configures a gateway. Zero fields take the defaults noted: a
// setting of serve's takes serve's default, named once in internal/config's
// Default; the rest are named here.
type Config struct {
	// Addr is the listen address (host:port); port 0 picks a free one
	// (default: serve's, 127.0.0.1:8080).
	Addr string
	// Listener, if set, is Addr already bound: the process binds it before
	// it starts anything, so a taken port fails at once. The gateway
	// closes it when it stops.
	Listener net.Listener
	// AuthSecret verifies bearer tokens (HS256). Required.
	AuthSecret []byte
	// AuthAudience and AuthIssuer, when set, are the aud and iss every
	// bearer token must carry (and what /dev/token writes). Empty: not
	// checked.
	AuthAudience string
	AuthIssuer   string
	// LinkTTL is the lifetime of a signed result link (default: serve's
	// result_link_ttl).
	LinkTTL time.Duration
	// MaxWait caps ?wait= long-polls (default 30s).
	MaxWait time.Duration
	// ReadRate/ReadBurst limit reads per requester per second, and
	// SubmitRate/SubmitBurst submissions (default: serve's gateway.read_rate
	// and read_burst, submit_rate and submit_burst).
	ReadRate    float64
	ReadBurst   int
	SubmitRate  float64
	SubmitBurst int
	// MaxStreamsPerRequester caps the event streams (SSE) one requester
	// has open at once; past it a new stream is refused 429 with
	// Retry-After.
	MaxStreamsPerRequester int
	// MaxLongPollsPerRequester caps the ?wait= long-polls one requester has
	// waiting at once, likewise.
	MaxLongPollsPerRequester int
	// MaxStreamsPerTenant and MaxLongPollsPerTenant cap them per tenant, all
	// its requesters together; MaxStreams and MaxLongPolls cap them for
	// this gateway process, all tenants together (an open stream costs
	// about 50 KiB, docs/performance.md). Past either, 429 with Retry-After
	// as above. They count per gateway process: N gateways hold N times as
	// many. Default (each of the six): serve's gateway.max_streams_... and
	// max_long_polls_... settings.
	MaxStreamsPerTenant   int
	MaxLongPollsPerTenant int
	MaxStreams            int
	MaxLongPolls          int
	// StreamWriteTimeout is how long one write of an event stream may wait
	// for the client to take the bytes; a client that stopped reading is cut
	// off after it, freeing its stream (default: serve's
	// gateway.stream_write_timeout).
	StreamWriteTimeout time.Duration
	// StreamHeartbeat is the interval of an event stream's keep-alive
	// comment (default 15s).
	StreamHeartbeat time.Duration
	// LeaveWorkToRelay: commit only; the dispatcher's relay publishes the
	// work message from the record change log (see internal/config).
	LeaveWorkToRelay bool
	// IndexDir is where the admin API's query index lives (a bbolt file
	// derived from the record change log, rebuilt when missing). Empty: a
	// temporary dir, removed on Stop, so every start rebuilds it.
	IndexDir string
	// TenantResultsMaxBytes is each tenant's result quota: once its stored
	// result bytes are 90% of it, the tenant's admissions answer 507
	// storage-full (default: serve's tenant_results_max_bytes).
	TenantResultsMaxBytes int64
	// ResultQuota, if set, is a tally of the tenants' stored result bytes
	// that the gateway shares with other components of its process (the
	// broker's uploads, in serve): admission reads each tenant's use from
	// it, against the tally's MaxBytes (TenantResultsMaxBytes is then not
	// read). Whoever made it runs it (Tally.Run) and gives it the metrics'
	// OnRead (ResultQuotaMetrics); the gateway only reads it. Default nil:
	// the gateway makes its own on Stores.Files and reads it from Start
	// until Stop.
	ResultQuota *tenantquota.Tally
	// BulkTimeBudget is how long one admin bulk cancel or retry works
	// before it answers with a cursor (default api.BulkTimeBudget, 10s).
	BulkTimeBudget time.Duration
	// Dev enables the /dev/token login used by the page in development.
	Dev bool
	// Endpoints is the address rule an endpoint type's URL is checked
	// against when it is declared (the endpoint caller checks every
	// connection with the same rule). Default: public addresses only.
	Endpoints egress.Policy
	// Callbacks relays the callbacks of asynchronous endpoint attempts to
	// the endpoint caller process that holds each (natsjs.CallbackRelay on
	// a connection with jobgate's permissions; docs/endpoints.md). Nil:
	// every callback answers 404.
	Callbacks callbackRelay
	// Failpoints injects faults (gateway.after-commit).
	Failpoints *failpoint.Set
	// Metrics records admissions and watchers; nil records nothing and
	// leaves /metrics empty.
	Metrics *metrics.Metrics
	// MetricsToken, when set, is the bearer token /metrics requires
	// (Authorization: Bearer <token>, else 401); empty leaves /metrics open.
	MetricsToken string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// withDefaults fills the zero fields. serve's settings take their values
// from internal/config's Default, so a gateway built without them (a test,
// a harness) runs as serve does and a default is changed in one place.
func (c *Config) withDefaults() Config {
	out := *c
	d := config.Default()
	if out.Addr == "" {
		out.Addr = d.HTTPAddr
	}
	if out.LinkTTL == 0 {
		out.LinkTTL = d.ResultLinkTTL
	}
	if out.MaxWait == 0 {
		out.MaxWait = 30 * time.Second
	}
	if out.ReadRate == 0 {
		out.ReadRate, out.ReadBurst = d.Gateway.ReadRate, d.Gateway.ReadBurst
	}
	if out.SubmitRate == 0 {
		out.SubmitRate, out.SubmitBurst = d.Gateway.SubmitRate, d.Gateway.SubmitBurst
	}
	for _, f := range []struct{ v, def *int }{
		{&out.MaxStreamsPerRequester, &d.Gateway.MaxStreamsPerRequester},
		{&out.MaxLongPollsPerRequester, &d.Gateway.MaxLongPollsPerRequester},
		{&out.MaxStreamsPerTenant, &d.Gateway.MaxStreamsPerTenant},
		{&out.MaxLongPollsPerTenant, &d.Gateway.MaxLongPollsPerTenant},
		{&out.MaxStreams, &d.Gateway.MaxStreams},
		{&out.MaxLongPolls, &d.Gateway.MaxLongPolls},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if out.StreamWriteTimeout == 0 {
		out.StreamWriteTimeout = d.Gateway.StreamWriteTimeout
	}
	if out.StreamHeartbeat == 0 {
		out.StreamHeartbeat = 15 * time.Second
	}
	if out.TenantResultsMaxBytes == 0 {
		out.TenantResultsMaxBytes = d.TenantResultsMaxBytes
	}
	if out.BulkTimeBudget == 0 {
		out.BulkTimeBudget = api.BulkTimeBudget
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out
}

// authOptions are the token rules of the deployment, for verifying and
// for the development sign-in's minting alike.
func (c *Config) authOptions() []auth.Option {
	return []auth.Option{auth.WithAudience(c.AuthAudience), auth.WithIssuer(c.AuthIssuer)}
}

func (c *Config) validate() error {
	var errs []error
	if len(c.AuthSecret) == 0 {
		errs = append(errs, errors.New("auth secret required"))
	}
	if c.LinkTTL < time.Second {
		errs = append(errs, fmt.Errorf("link TTL must be at least 1s, got %s", c.LinkTTL))
	}
	if c.MaxStreamsPerRequester < 1 || c.MaxLongPollsPerRequester < 1 || c.MaxStreamsPerTenant < 1 ||
		c.MaxLongPollsPerTenant < 1 || c.MaxStreams < 1 || c.MaxLongPolls < 1 {
		errs = append(errs, errors.New("streams and long-polls per requester, per tenant and in all must be at least 1"))
	}
	if c.StreamWriteTimeout <= 0 || c.StreamHeartbeat <= 0 {
		errs = append(errs, errors.New("stream write timeout and heartbeat must be positive"))
	}
	if c.TenantResultsMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("tenant result quota must be positive, got %d", c.TenantResultsMaxBytes))
	}
	if c.ReadBurst < 1 || c.SubmitBurst < 1 {
		errs = append(errs, errors.New("rate limit bursts must be at least 1"))
	}
	return errors.Join(errs...)
}
