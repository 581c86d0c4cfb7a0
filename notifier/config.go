package notifier

import (
	"errors"
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
)

// Config tunes a notifier. Zero fields take the defaults of DefaultConfig.
type Config struct {
	// Webhooks lists each tenant's endpoints.
	Webhooks map[string][]Webhook
	// AllowPrivate permits webhook URLs that resolve to loopback, private or
	// link-local addresses. Off, such deliveries are refused (SSRF).
	AllowPrivate bool
	// Retries are the base delays between delivery attempts: attempt n+1
	// follows attempt n after Retries[n-1] (± Jitter, at least the receiver's
	// Retry-After). len(Retries)+1 attempts in all; nil means the default
	// schedule, an empty non-nil slice a single attempt.
	Retries []time.Duration
	// Jitter spreads each delay by ± this fraction (0 to 1).
	Jitter float64
	// MaxRetryAfter caps how long a receiver's Retry-After may postpone the
	// next attempt.
	MaxRetryAfter time.Duration
	// Timeout bounds one webhook request.
	Timeout time.Duration
	// Mail configures the mail channel.
	Mail Mail
	// Concurrency is how many events one instance turns into delivery
	// tasks at once (queueing only: no receiver is waited for).
	Concurrency int
	// MaxPending bounds the events being turned into tasks across all
	// instances (the event consumer's MaxAckPending).
	MaxPending int
	// DestinationConcurrency is how many deliveries one instance makes at
	// once to one destination (a webhook endpoint, or one tenant's mail).
	DestinationConcurrency int
	// MaxPendingPerDestination caps the deliveries queued for one
	// destination and not done yet, those waiting for a retry included.
	// Past it new notices for that destination are dropped (counted as
	// jobgate_deliveries_total{outcome="dropped"} and logged); the jobs
	// stay readable over HTTP and on the events stream.
	MaxPendingPerDestination int
	// AckWait is how long JetStream waits before it hands an unacknowledged
	// event to another instance; a busy handler extends it while it works.
	AckWait time.Duration
	// StopGrace is how long Stop lets in-flight deliveries finish before it
	// cancels them.
	StopGrace time.Duration
	// Instance names this process in logs and mail claims.
	Instance string
	// BaseURL is where people reach the reviewer's page (e.g.
	// http://host:8080); a mail links to <BaseURL>/#job=<id>.
	BaseURL string
	// ResultTTL is how long result files are kept (JOBGATE_RESULT_TTL); a
	// mail about a result says until when. Zero leaves that line out.
	ResultTTL time.Duration
	// Metrics exports the delivery counts (jobgate_deliveries_total); nil
	// exports nothing.
	Metrics *metrics.Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Webhook is one endpoint of a tenant.
type Webhook struct {
	URL string
	// Secret signs deliveries: "whsec_" + base64 (Standard Webhooks) or raw.
	Secret string
	// States, if set, limits deliveries to events of these states.
	States []job.State
}

// Mail configures the mail channel.
type Mail struct {
	// Host of the SMTP server; empty writes .eml files into Outbox instead.
	Host     string
	Port     int
	Username string
	Password string
	From     string
	// Addresses maps "tenant/requester" to a mail address. Requesters without
	// one get no mail.
	Addresses map[string]string
	// Outbox is the directory of .eml files when Host is empty.
	Outbox string
	// Timeout bounds one SMTP conversation.
	Timeout time.Duration
}

// DefaultConfig returns the settings a notifier runs with when given none:
// those serve has a setting for are serve's defaults (internal/config's
// Default names each once), the rest are named here.
func DefaultConfig() Config {
	serve := config.Default().Notifier
	return Config{
		Retries:       serve.WebhookRetries,
		Jitter:        0.2,
		MaxRetryAfter: time.Hour,
		Timeout:       15 * time.Second,
		Mail:          Mail{Port: serve.Mail.SMTPPort, From: serve.Mail.From, Timeout: 30 * time.Second},
		Concurrency:   16,
		MaxPending:    10000,

		DestinationConcurrency:   4,
		MaxPendingPerDestination: 10000,
		AckWait:                  30 * time.Second,
		StopGrace:                15 * time.Second,
		Instance:                 "notifier",
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Retries == nil {
		c.Retries = d.Retries
	}
	if c.Jitter == 0 {
		c.Jitter = d.Jitter
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = d.MaxRetryAfter
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.Mail.Port == 0 {
		c.Mail.Port = d.Mail.Port
	}
	if c.Mail.From == "" {
		c.Mail.From = d.Mail.From
	}
	if c.Mail.Timeout == 0 {
		c.Mail.Timeout = d.Mail.Timeout
	}
	if c.Concurrency == 0 {
		c.Concurrency = d.Concurrency
	}
	if c.MaxPending == 0 {
		c.MaxPending = d.MaxPending
	}
	if c.AckWait == 0 {
		c.AckWait = d.AckWait
	}
	if c.DestinationConcurrency == 0 {
		c.DestinationConcurrency = d.DestinationConcurrency
	}
	if c.MaxPendingPerDestination == 0 {
		c.MaxPendingPerDestination = d.MaxPendingPerDestination
	}
	if c.StopGrace == 0 {
		c.StopGrace = d.StopGrace
	}
	if c.Instance == "" {
		c.Instance = d.Instance
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return c
}

// validate checks every setting and says which one is wrong.
func (c *Config) validate() error {
	var errs []error
	for tenant, hooks := range c.Webhooks {
		if !job.ValidScopeID(tenant) {
			errs = append(errs, fmt.Errorf("webhooks: tenant %q is not a valid id", tenant))
		}
		for i, h := range hooks {
			if err := validateWebhook(h, c.AllowPrivate); err != nil {
				errs = append(errs, fmt.Errorf("webhooks[%s][%d]: %w", tenant, i, err))
			}
		}
	}
	for i, d := range c.Retries {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("retries[%d] must be positive, got %s", i, d))
		}
	}
	if c.Jitter < 0 || c.Jitter > 1 {
		errs = append(errs, fmt.Errorf("jitter must be 0 to 1, got %g", c.Jitter))
	}
	if c.MaxRetryAfter < 0 || c.Timeout < 0 || c.AckWait < time.Second || c.StopGrace < 0 {
		errs = append(errs, errors.New("timeouts must be positive and ack wait at least 1s"))
	}
	if c.Concurrency < 1 || c.MaxPending < c.Concurrency {
		errs = append(errs, fmt.Errorf("concurrency must be at least 1 and max pending at least concurrency, got %d and %d", c.Concurrency, c.MaxPending))
	}
	if c.DestinationConcurrency < 1 || c.MaxPendingPerDestination < c.DestinationConcurrency {
		errs = append(errs, fmt.Errorf("destination concurrency must be at least 1 and max pending per destination at least that, got %d and %d",
			c.DestinationConcurrency, c.MaxPendingPerDestination))
	}
	if err := c.Mail.validate(); err != nil {
		errs = append(errs, fmt.Errorf("mail: %w", err))
	}
	return errors.Join(errs...)
}

func validateWebhook(h Webhook, allowPrivate bool) error {
	// Errors name the URL redacted (RedactURL): the path and query carry
	// the receiver's token, and these errors end up in logs.
	shown := RedactURL(h.URL)
	u, err := url.Parse(h.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL it quotes
		}
		return fmt.Errorf("url %s: %w", shown, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("url %s: scheme must be http or https", shown)
	}
	if u.Hostname() == "" || u.User != nil {
		return fmt.Errorf("url %s: needs a host and no user info", shown)
	}
	if !allowPrivate {
		// The dialer checks every address it connects to; refusing obvious
		// cases here reports them at start-up instead of at the first job.
		host := strings.ToLower(u.Hostname())
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return fmt.Errorf("url %s: %w", shown, ErrForbiddenAddress)
		}
		if ip, err := netip.ParseAddr(host); err == nil && !PublicAddr(ip) {
			return fmt.Errorf("url %s: %w", shown, ErrForbiddenAddress)
		}
	}
	if h.Secret == "" {
		return errors.New("secret must not be empty")
	}
	if _, err := DecodeSecret(h.Secret); err != nil {
		return err
	}
	for _, s := range h.States {
		if !s.Valid() {
			return fmt.Errorf("unknown state %q", s)
		}
	}
	return nil
}

func (m *Mail) validate() error {
	var errs []error
	if m.Host == "" && len(m.Addresses) > 0 && m.Outbox == "" {
		errs = append(errs, errors.New("needs an SMTP host or an outbox directory"))
	}
	if m.Port < 1 || m.Port > 65535 {
		errs = append(errs, fmt.Errorf("port must be 1 to 65535, got %d", m.Port))
	}
	if _, err := mail.ParseAddress(m.From); err != nil {
		errs = append(errs, fmt.Errorf("from %q: %w", m.From, err))
	}
	for scope, addr := range m.Addresses {
		tenant, requester, ok := strings.Cut(scope, "/")
		if !ok || !job.ValidScopeID(tenant) || !job.ValidScopeID(requester) {
			errs = append(errs, fmt.Errorf("addresses: key %q must be tenant/requester", scope))
		}
		if _, err := mail.ParseAddress(addr); err != nil {
			errs = append(errs, fmt.Errorf("addresses[%s]: %w", scope, err))
		}
	}
	if m.Timeout <= 0 {
		errs = append(errs, errors.New("timeout must be positive"))
	}
	return errors.Join(errs...)
}
