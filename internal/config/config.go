package config

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/internal/egress"
	"github.com/jobgate/jobgate/internal/tenantquota"
	"github.com/jobgate/jobgate/pkg/api"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is every setting of a jobgate process. The zero value is not
// useful; start from Default.
type Config struct {
	// HTTPAddr is where the gateway listens.
	HTTPAddr string `yaml:"http_addr"`
	// DataDir holds the embedded NATS store, the generated auth secret and
	// the mail outbox.
	DataDir string `yaml:"data_dir"`
	// AuthSecret is the HS256 secret of bearer tokens. Empty: `serve`
	// generates one into DataDir/auth.secret and `token` reads it there.
	AuthSecret string `yaml:"auth_secret"`
	// AuthAudience and AuthIssuer, when set, are the aud and iss claims
	// every bearer token must carry (a token whose aud does not name
	// AuthAudience, or whose iss is not AuthIssuer, is refused), and what
	// `jobgate token` writes into the tokens it mints. Empty: not checked.
	AuthAudience string `yaml:"auth_audience"`
	AuthIssuer   string `yaml:"auth_issuer"`
	// MetricsToken, when set, is the bearer token the gateway's /metrics
	// requires (its series name tenants); empty leaves /metrics open, which
	// suits only a gateway no one else reaches (the default loopback address).
	MetricsToken string `yaml:"metrics_token"`
	// OpsAddr, when set (host:port), is where a process that runs no
	// gateway (dispatcher, notifier, renderer) serves /healthz, /readyz and
	// /metrics, for an orchestrator's probes and a scraper: the gateway
	// serves them on HTTPAddr. Empty: such a process listens on nothing.
	OpsAddr string `yaml:"ops_addr"`
	// JobTTL is how long a job record stays readable after its last change;
	// its idempotency key protects against duplicates for exactly as long.
	JobTTL time.Duration `yaml:"job_ttl"`
	// ResultTTL is how long result files are kept.
	ResultTTL time.Duration `yaml:"result_ttl"`
	// StoreMaxBytes is the byte budget of each of the job records, work
	// queue, events, index, notices and deliveries; ResultsMaxBytes that
	// of the result files. Admission answers 507 storage-full once any of
	// them is 90% full. An embedded server is given their sum as its
	// JetStream storage; an external one must have it to spare.
	StoreMaxBytes   int64 `yaml:"store_max_bytes"`
	ResultsMaxBytes int64 `yaml:"results_max_bytes"`
	// TenantResultsMaxBytes is each tenant's result quota: the bytes of
	// result files one tenant may have stored at once. A result that would
	// take its tenant past it fails its job budget_exceeded, and admission
	// answers the tenant 507 storage-full once it is 90% used; other
	// tenants are not touched. At least 1 MiB; one at or above
	// ResultsMaxBytes bounds no tenant beyond the shared budget.
	TenantResultsMaxBytes int64 `yaml:"tenant_results_max_bytes"`
	// ResultLinkTTL is the lifetime of a signed result link.
	ResultLinkTTL time.Duration `yaml:"result_link_ttl"`
	// RenderTimeout is the time budget of one render attempt.
	RenderTimeout time.Duration `yaml:"render_timeout"`
	// MaxAttempts is how many render attempts a job gets.
	MaxAttempts int `yaml:"max_attempts"`
	// Failpoints injects faults for tests, e.g. "gateway.after-commit=exit".
	Failpoints string `yaml:"failpoints"`
	// LogFormat is text or json; LogLevel is debug, info, warn or error.
	LogFormat string `yaml:"log_format"`
	LogLevel  string `yaml:"log_level"`
	// Dev enables development helpers (the /dev/token login of the page).
	// Only `serve` honours it.
	Dev bool `yaml:"dev"`
	// EndpointAllow lists the CIDRs (comma separated) that endpoint types'
	// URLs may reach besides public addresses (JOBGATE_ENDPOINT_ALLOW);
	// `serve --dev` adds loopback.
	EndpointAllow string `yaml:"endpoint_allow"`
	// PublicURL is the gateway's base URL as endpoint handlers reach it
	// (JOBGATE_PUBLIC_URL): the callback URLs of asynchronous attempts
	// start with it. Empty: this process's gateway, else http://HTTPAddr.
	PublicURL string `yaml:"public_url"`

	NATS     NATS     `yaml:"nats"`
	Renderer Renderer `yaml:"renderer"`
	Gateway  Gateway  `yaml:"gateway"`
	Notifier Notifier `yaml:"notifier"`
}

// NATS says how to reach JetStream and how resources are laid out.
type NATS struct {
	// URL of an external NATS deployment (comma-separated); empty runs an
	// embedded server under DataDir.
	URL string `yaml:"url"`
	// Listen lets the embedded server also accept NATS clients (host:port).
	Listen string `yaml:"listen"`
	// Replicas of streams and buckets: 1 embedded, 3 on a cluster.
	Replicas int `yaml:"replicas"`
	// SyncAlways (embedded) fsyncs every write before acknowledging it.
	SyncAlways bool   `yaml:"sync_always"`
	CredsFile  string `yaml:"creds_file"`
	NKeyFile   string `yaml:"nkey_file"`
	User       string `yaml:"user"`
	Password   string `yaml:"password"`
	TLSCA      string `yaml:"tls_ca"`
	TLSCert    string `yaml:"tls_cert"`
	TLSKey     string `yaml:"tls_key"`
}

// Renderer tunes the render workers.
type Renderer struct {
	// Concurrency is how many renders one process runs at once.
	Concurrency int `yaml:"concurrency"`
	// MaxOutputBytes caps the size of one result file.
	MaxOutputBytes int64 `yaml:"max_output_bytes"`
	// TenantWeights gives tenants a larger share of render slots while
	// several have work (others weigh 1); see docs/tenants.md.
	TenantWeights map[string]int `yaml:"tenant_weights"`
	// TenantMaxRunning caps how many reports of one tenant all renderers
	// hold at once; 0 is no cap. TenantMaxRunningFor overrides it per tenant.
	TenantMaxRunning    int            `yaml:"tenant_max_running"`
	TenantMaxRunningFor map[string]int `yaml:"tenant_max_running_for"`
}

// Gateway tunes the HTTP API.
type Gateway struct {
	// ReadRate and ReadBurst limit read requests per requester (per second).
	ReadRate  float64 `yaml:"read_rate"`
	ReadBurst int     `yaml:"read_burst"`
	// SubmitRate and SubmitBurst limit submissions per requester.
	SubmitRate  float64 `yaml:"submit_rate"`
	SubmitBurst int     `yaml:"submit_burst"`
	// MaxStreamsPerRequester and MaxLongPollsPerRequester cap what one
	// requester holds open at once (event streams; ?wait= long-polls);
	// past them a request answers 429 with Retry-After.
	MaxStreamsPerRequester   int `yaml:"max_streams_per_requester"`
	MaxLongPollsPerRequester int `yaml:"max_long_polls_per_requester"`
	// MaxStreamsPerTenant and MaxLongPollsPerTenant cap them for all of a
	// tenant's requesters together, MaxStreams and MaxLongPolls for the
	// whole gateway process (each gateway of a deployment counts its own);
	// past them too a request answers 429 with Retry-After.
	MaxStreamsPerTenant   int `yaml:"max_streams_per_tenant"`
	MaxLongPollsPerTenant int `yaml:"max_long_polls_per_tenant"`
	MaxStreams            int `yaml:"max_streams"`
	MaxLongPolls          int `yaml:"max_long_polls"`
	// StreamWriteTimeout cuts off an event stream whose client stopped
	// reading: one write may wait this long.
	StreamWriteTimeout time.Duration `yaml:"stream_write_timeout"`
	// LeaveWorkToRelay skips the gateway's own work publish after the
	// commit: admission is then one JetStream write and the dispatcher's
	// relay publishes the work message from the change log (the same message,
	// one change-log hop later; it publishes it in any case, for a gateway
	// that died before its publish). Default true: the faster admission
	// (docs/performance.md); every deployment runs a dispatcher, which
	// also publishes the admission's event. False: the gateway publishes
	// the work itself too, for the earliest first claim.
	LeaveWorkToRelay bool `yaml:"leave_work_to_relay"`
}

// Notifier configures completion notices.
type Notifier struct {
	// Webhooks per tenant id.
	Webhooks map[string][]Webhook `yaml:"webhooks"`
	// AllowPrivateWebhooks permits webhook URLs that resolve to loopback or
	// private ranges (refused by default against SSRF).
	AllowPrivateWebhooks bool `yaml:"allow_private_webhooks"`
	// WebhookRetries is the backoff schedule between delivery attempts.
	WebhookRetries []time.Duration `yaml:"webhook_retries"`
	// Mail sends one notice per terminal state to requesters' addresses.
	Mail Mail `yaml:"mail"`
	// MaxPendingPerDestination caps the notices waiting for one webhook
	// endpoint (or one tenant's mail), retries included; past it new notices
	// for that destination are dropped and counted. 0 = 10000.
	MaxPendingPerDestination int `yaml:"max_pending_per_destination"`
	// DestinationConcurrency is how many deliveries one notifier process
	// makes at once to one destination. 0 = 4.
	DestinationConcurrency int `yaml:"destination_concurrency"`
}

// Webhook is one endpoint of a tenant.
type Webhook struct {
	URL string `yaml:"url"`
	// Secret signs deliveries (Standard Webhooks, "whsec_" + base64 or raw).
	Secret string `yaml:"secret"`
	// States, if set, limits deliveries to events of these job states
	// (e.g. [succeeded, failed, canceled]); empty delivers every change.
	States []string `yaml:"states"`
}

// Mail configures SMTP delivery. With no SMTPHost, notices are written as
// .eml files under DataDir/outbox.
type Mail struct {
	SMTPHost string `yaml:"smtp_host"`
	SMTPPort int    `yaml:"smtp_port"`
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	From     string `yaml:"from"`
	// Addresses maps "tenant/requester" to a mail address.
	Addresses map[string]string `yaml:"addresses"`
}

// Default returns the settings `jobgate serve` runs with when given none.
func Default() Config {
	return Config{
		HTTPAddr:      "127.0.0.1:8080",
		DataDir:       "./data",
		JobTTL:        720 * time.Hour,
		ResultTTL:     168 * time.Hour,
		ResultLinkTTL: 5 * time.Minute,
		RenderTimeout: api.DefaultTimeout,
		MaxAttempts:   api.DefaultAttempts,
		LogFormat:     "text",
		LogLevel:      "info",
		NATS:          NATS{Replicas: 1, SyncAlways: true},
		Renderer:      Renderer{Concurrency: api.DefaultConcurrency, MaxOutputBytes: api.DefaultMaxResultBytes},
		Gateway: Gateway{ReadRate: 20, ReadBurst: 40, SubmitRate: 50, SubmitBurst: 100, LeaveWorkToRelay: true,
			MaxStreamsPerRequester: 20, MaxLongPollsPerRequester: 20, MaxStreamsPerTenant: 2000, MaxLongPollsPerTenant: 2000,
			MaxStreams: 10000, MaxLongPolls: 10000, StreamWriteTimeout: 30 * time.Second},
		Notifier: Notifier{
			WebhookRetries: []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour},
			Mail:           Mail{SMTPPort: 587, From: "jobgate@localhost"},
		},

		// 2 GiB holds two to three million job records (or their work
		// messages, events, ...: 0.6 to 1 KiB each); 8 GiB of results.
		StoreMaxBytes:         2 << 30,
		ResultsMaxBytes:       8 << 30,
		TenantResultsMaxBytes: tenantquota.DefaultMaxBytes,
	}
}

// LoadFile merges a YAML file into c. Unknown keys are an error, so a typo
// does not silently fall back to a default.
func (c *Config) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// LoadEnv applies JOBGATE_* variables from getenv (os.Getenv in production).
func (c *Config) LoadEnv(getenv func(string) string) error {
	var errs []error
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	dur := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				return
			}
			*dst = d
		}
	}
	num := func(name string, dst *int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				return
			}
			*dst = n
		}
	}
	size := func(name string, dst *int64) {
		if v := getenv(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				return
			}
			*dst = n
		}
	}
	boolean := func(name string, dst *bool) {
		if v := getenv(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				return
			}
			*dst = b
		}
	}
	str("JOBGATE_HTTP_ADDR", &c.HTTPAddr)
	str("JOBGATE_DATA_DIR", &c.DataDir)
	str("JOBGATE_NATS_URL", &c.NATS.URL)
	str("JOBGATE_NATS_LISTEN", &c.NATS.Listen)
	str("JOBGATE_NATS_CREDS", &c.NATS.CredsFile)
	str("JOBGATE_NATS_NKEY", &c.NATS.NKeyFile)
	str("JOBGATE_NATS_USER", &c.NATS.User)
	str("JOBGATE_NATS_PASSWORD", &c.NATS.Password)
	str("JOBGATE_NATS_TLS_CA", &c.NATS.TLSCA)
	str("JOBGATE_NATS_TLS_CERT", &c.NATS.TLSCert)
	str("JOBGATE_NATS_TLS_KEY", &c.NATS.TLSKey)
	num("JOBGATE_NATS_REPLICAS", &c.NATS.Replicas)
	boolean("JOBGATE_NATS_SYNC_ALWAYS", &c.NATS.SyncAlways)
	str("JOBGATE_AUTH_SECRET", &c.AuthSecret)
	str("JOBGATE_AUTH_AUDIENCE", &c.AuthAudience)
	str("JOBGATE_AUTH_ISSUER", &c.AuthIssuer)
	str("JOBGATE_METRICS_TOKEN", &c.MetricsToken)
	str("JOBGATE_OPS_ADDR", &c.OpsAddr)
	dur("JOBGATE_JOB_TTL", &c.JobTTL)
	dur("JOBGATE_RESULT_TTL", &c.ResultTTL)
	size("JOBGATE_STORE_MAX_BYTES", &c.StoreMaxBytes)
	size("JOBGATE_RESULTS_MAX_BYTES", &c.ResultsMaxBytes)
	size("JOBGATE_TENANT_RESULTS_MAX_BYTES", &c.TenantResultsMaxBytes)
	dur("JOBGATE_RESULT_LINK_TTL", &c.ResultLinkTTL)
	dur("JOBGATE_RENDER_TIMEOUT", &c.RenderTimeout)
	num("JOBGATE_MAX_ATTEMPTS", &c.MaxAttempts)
	str("JOBGATE_FAILPOINTS", &c.Failpoints)
	str("JOBGATE_LOG_FORMAT", &c.LogFormat)
	str("JOBGATE_LOG_LEVEL", &c.LogLevel)
	boolean("JOBGATE_DEV", &c.Dev)
	str("JOBGATE_ENDPOINT_ALLOW", &c.EndpointAllow)
	str("JOBGATE_PUBLIC_URL", &c.PublicURL)
	num("JOBGATE_MAX_STREAMS_PER_REQUESTER", &c.Gateway.MaxStreamsPerRequester)
	num("JOBGATE_MAX_LONG_POLLS_PER_REQUESTER", &c.Gateway.MaxLongPollsPerRequester)
	num("JOBGATE_MAX_STREAMS_PER_TENANT", &c.Gateway.MaxStreamsPerTenant)
	num("JOBGATE_MAX_LONG_POLLS_PER_TENANT", &c.Gateway.MaxLongPollsPerTenant)
	num("JOBGATE_MAX_STREAMS", &c.Gateway.MaxStreams)
	num("JOBGATE_MAX_LONG_POLLS", &c.Gateway.MaxLongPolls)
	dur("JOBGATE_STREAM_WRITE_TIMEOUT", &c.Gateway.StreamWriteTimeout)
	return errors.Join(errs...)
}

// MinJobTTL is the shortest job_ttl: the work stream keeps its messages for
// the job TTL and must remember their ids (its duplicate window, 10m in
// natsjs.DefaultLayout) at least as long, which JetStream enforces when the
// stream is created. A test in natsjs provisions a layout with it.
const MinJobTTL = 10 * time.Minute

// Validate checks every setting and says which one is wrong.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("http_addr %q: %w", c.HTTPAddr, err))
	}
	if c.OpsAddr != "" {
		if _, _, err := net.SplitHostPort(c.OpsAddr); err != nil {
			errs = append(errs, fmt.Errorf("ops_addr (JOBGATE_OPS_ADDR) %q: %w", c.OpsAddr, err))
		}
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data_dir must not be empty"))
	}
	if c.JobTTL < MinJobTTL {
		errs = append(errs, fmt.Errorf("job_ttl must be at least 10m (the work queue remembers message ids for 10m and keeps messages no longer than job_ttl), got %s", c.JobTTL))
	}
	if c.ResultTTL < time.Minute {
		errs = append(errs, fmt.Errorf("result_ttl must be at least 1m, got %s", c.ResultTTL))
	}
	if c.StoreMaxBytes < 64<<20 || c.ResultsMaxBytes < 64<<20 {
		errs = append(errs, fmt.Errorf("store_max_bytes and results_max_bytes must be at least 64 MiB (67108864), got %d and %d", c.StoreMaxBytes, c.ResultsMaxBytes))
	}
	if c.TenantResultsMaxBytes < tenantquota.MinMaxBytes {
		errs = append(errs, fmt.Errorf("tenant_results_max_bytes (JOBGATE_TENANT_RESULTS_MAX_BYTES) must be at least 1 MiB (%d), got %d",
			tenantquota.MinMaxBytes, c.TenantResultsMaxBytes))
	}
	if c.ResultLinkTTL < time.Second {
		errs = append(errs, fmt.Errorf("result_link_ttl must be at least 1s, got %s", c.ResultLinkTTL))
	}
	if c.RenderTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("render_timeout must be at least 100ms, got %s", c.RenderTimeout))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("max_attempts must be 1 to 100, got %d", c.MaxAttempts))
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("public_url (JOBGATE_PUBLIC_URL): %q is not an absolute http(s) URL", c.PublicURL))
		}
	}
	if _, err := egress.ParseAllow(c.EndpointAllow); err != nil {
		errs = append(errs, fmt.Errorf("endpoint_allow (JOBGATE_ENDPOINT_ALLOW): %w", err))
	}
	if c.NATS.Replicas < 1 || c.NATS.Replicas > 5 {
		errs = append(errs, fmt.Errorf("nats.replicas must be 1 to 5, got %d", c.NATS.Replicas))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log_format must be text or json, got %q", c.LogFormat))
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level must be debug, info, warn or error, got %q", c.LogLevel))
	}
	if c.Renderer.TenantMaxRunning < 0 {
		errs = append(errs, fmt.Errorf("renderer.tenant_max_running must not be negative, got %d", c.Renderer.TenantMaxRunning))
	}
	for t, w := range c.Renderer.TenantWeights {
		if w < 1 || w > 1000 {
			errs = append(errs, fmt.Errorf("renderer.tenant_weights[%s] must be 1 to 1000, got %d", t, w))
		}
	}
	for name, n := range map[string]int{
		"gateway.max_streams_per_requester": c.Gateway.MaxStreamsPerRequester, "gateway.max_long_polls_per_requester": c.Gateway.MaxLongPollsPerRequester,
		"gateway.max_streams_per_tenant": c.Gateway.MaxStreamsPerTenant, "gateway.max_long_polls_per_tenant": c.Gateway.MaxLongPollsPerTenant,
		"gateway.max_streams": c.Gateway.MaxStreams, "gateway.max_long_polls": c.Gateway.MaxLongPolls,
	} {
		if n < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, got %d", name, n))
		}
	}
	if c.Renderer.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("renderer.concurrency must be at least 1, got %d", c.Renderer.Concurrency))
	}
	return errors.Join(errs...)
}

// Embedded reports whether this process runs its own NATS server.
func (c *Config) Embedded() bool { return c.NATS.URL == "" }

// Path returns a path under the data dir.
func (c *Config) Path(elem ...string) string {
	return filepath.Join(append([]string{c.DataDir}, elem...)...)
}

// EndpointPolicy is the address rule of the requests to endpoint types:
// public addresses, EndpointAllow's ranges, and loopback in development.
func (c *Config) EndpointPolicy() egress.Policy {
	allow, _ := egress.ParseAllow(c.EndpointAllow) // Validate reported a bad list
	if c.Dev {
		allow = append(allow, egress.Loopback...)
	}
	return egress.Policy{Allow: allow}
}
