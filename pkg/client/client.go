package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
)

// Client talks to one jobgate gateway as one requester. It is safe for
// concurrent use.
type Client struct {
	base    *url.URL
	token   string
	scope   string
	hc      *http.Client
	clock   Clock
	retry   RetryPolicy
	log     *slog.Logger
	journal *Journal

	journalPath string
	journalOn   bool
	lockTimeout time.Duration
	retention   time.Duration
	userAgent   string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (transport, proxies, TLS). The SDK
// never lets it follow redirects itself: it follows a result's 303 to the
// signed link without sending the bearer token there.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithJournal keeps each submission's key in a journal file (bbolt) before
// its first attempt, so a process that crashes mid-submission resumes it
// with the same key (Resume) and the server admits one job. Without it
// (the default) keys live in memory: retries within the process reuse them,
// a crash loses the pending ones. An empty path means DefaultJournalPath().
// A library inside a server usually wants the journal next to its own
// state; the CLI keeps one by default.
func WithJournal(path string) Option {
	return func(c *Client) { c.journalPath, c.journalOn = path, true }
}

// WithoutJournal keeps keys in memory only (the default); it undoes an
// earlier WithJournal.
func WithoutJournal() Option { return func(c *Client) { c.journalOn = false } }

// WithJournalLockTimeout sets how long to wait for another process holding
// the journal before failing with ErrJournalLocked (default 5s).
func WithJournalLockTimeout(d time.Duration) Option { return func(c *Client) { c.lockTimeout = d } }

// WithKeyRetention sets how long the server keeps an idempotency key
// (JOBGATE_JOB_TTL, default 720h); journal entries of finished jobs are
// pruned after it.
func WithKeyRetention(d time.Duration) Option { return func(c *Client) { c.retention = d } }

// WithClock injects the clock (tests).
func WithClock(clk Clock) Option { return func(c *Client) { c.clock = clk } }

// WithRetryPolicy replaces the retry policy; zero fields keep their defaults.
func WithRetryPolicy(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithLogger sets the logger (default: discard). Raw keys and tokens are
// never logged.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the gateway at baseURL (e.g. http://127.0.0.1:8080)
// authenticating with the bearer token.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http(s)://host[:port]", baseURL)
	}
	if token == "" {
		return nil, errors.New("no bearer token given")
	}
	c := &Client{
		base: u, token: token,
		clock: realClock{}, retry: DefaultRetryPolicy(),
		lockTimeout: 5 * time.Second, retention: 720 * time.Hour,
		userAgent: "jobgate-go-client",
	}
	for _, o := range opts {
		o(c)
	}
	c.retry = c.retry.withDefaults()
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	hc := http.DefaultClient
	if c.hc != nil {
		hc = c.hc
	}
	nc := *hc
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.hc = &nc
	c.scope = scopeOf(u, token)
	if c.journalOn {
		if c.journalPath == "" {
			if c.journalPath, err = DefaultJournalPath(); err != nil {
				return nil, err
			}
		}
		c.journal = &Journal{path: c.journalPath, lockTimeout: c.lockTimeout, retention: c.retention, now: c.clock.Now}
	}
	return c, nil
}

// BaseURL is the gateway's URL.
func (c *Client) BaseURL() string { return c.base.String() }

// Journal is the client's journal, nil when it keeps none.
func (c *Client) Journal() *Journal { return c.journal }

// scopeOf names whose submissions a journal entry holds: the gateway and the
// token's tenant and subject (read, not verified: the server verifies). A
// key is only ever resumed with the identity that made it.
func scopeOf(base *url.URL, token string) string {
	id := ""
	if parts := strings.Split(token, "."); len(parts) == 3 {
		if raw, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			var cl struct {
				Tenant string `json:"tenant"`
				Sub    string `json:"sub"`
			}
			if json.Unmarshal(raw, &cl) == nil && cl.Tenant != "" && cl.Sub != "" {
				id = cl.Tenant + "/" + cl.Sub
			}
		}
	}
	if id == "" {
		sum := sha256.Sum256([]byte(token))
		id = "token:" + hex.EncodeToString(sum[:8])
	}
	return base.String() + " " + id
}

// request is one logical HTTP call; send repeats it while that is safe.
type request struct {
	method  string
	path    string // relative to the base URL, or an absolute URL
	query   url.Values
	header  http.Header
	body    []byte
	noAuth  bool          // signed result links carry their own authority
	stream  bool          // the caller reads the body (SSE, downloads)
	extra   time.Duration // added to the attempt timeout (long-polls)
	keyHash string        // for logs
}

// maxJSONBody bounds a buffered response body.
const maxJSONBody = 8 << 20

// send performs r, retrying transport errors and retryable statuses with
// backoff. It returns the first response with any other status (the caller
// interprets it) and how many attempts it took; when it gives up it returns
// the last failure.
func (c *Client) send(ctx context.Context, r *request) (*http.Response, int, error) {
	start := c.clock.Now()
	for n := 0; ; n++ {
		resp, err := c.attempt(ctx, r)
		if err == nil && !retryableStatus(resp.StatusCode) {
			return resp, n + 1, nil
		}
		if ctx.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return nil, n + 1, fmt.Errorf("%s %s: %w", r.method, r.path, context.Cause(ctx))
		}
		var wait time.Duration
		if err != nil {
			if !retryableErr(err) {
				return nil, n + 1, err
			}
		} else {
			err = problemFrom(resp, c.clock.Now())
			var p *ProblemError
			if errors.As(err, &p) {
				wait = p.RetryAfter
			}
		}
		delay := c.retry.Backoff(n, wait)
		elapsed := c.clock.Now().Sub(start)
		left := c.retry.MaxElapsed - elapsed
		// The budget is used to its end: a delay that would overshoot it
		// is cut so the last attempt starts at the deadline. Only the
		// server's own Retry-After beyond it ends the retrying early, as
		// an earlier retry would ignore what the server asked for.
		if c.retry.MaxAttempts > 0 && n+1 >= c.retry.MaxAttempts || left <= 0 || wait > left {
			return nil, n + 1, fmt.Errorf("gave up after %d attempts in %s: %w", n+1, elapsed.Round(time.Millisecond), err)
		}
		delay = min(delay, left)
		attrs := []any{"method", r.method, "path", r.path, "attempt", n + 1, "delay", delay.Round(time.Millisecond), "err", err}
		if r.keyHash != "" {
			attrs = append(attrs, "key_hash", r.keyHash)
		}
		c.log.Warn("request failed, retrying", attrs...)
		if err := c.clock.Sleep(ctx, delay); err != nil {
			return nil, n + 1, fmt.Errorf("%s %s: %w", r.method, r.path, context.Cause(ctx))
		}
	}
}

// attempt makes one HTTP exchange. Its timeout covers the response headers
// and, unless r.stream, the (small) body, which it buffers.
func (c *Client) attempt(ctx context.Context, r *request) (*http.Response, error) {
	u, err := c.base.Parse(r.path)
	if err != nil {
		return nil, err
	}
	if len(r.query) > 0 {
		u.RawQuery = r.query.Encode()
	}
	actx, cancel := context.WithCancel(ctx)
	limit := c.retry.AttemptTimeout + r.extra
	timer := time.AfterFunc(limit, cancel)
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(actx, r.method, u.String(), body)
	if err != nil {
		timer.Stop()
		cancel()
		return nil, err
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if !r.noAuth {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if r.body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.hc.Do(req)
	if err != nil {
		stopped := timer.Stop()
		cancel()
		if !stopped && ctx.Err() == nil {
			err = fmt.Errorf("no response within %s: %w", limit, err)
		}
		return nil, err
	}
	if r.stream && resp.StatusCode < 400 {
		timer.Stop()
		resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		return resp, nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody))
	resp.Body.Close()
	stopped := timer.Stop()
	cancel()
	if err != nil {
		if !stopped && ctx.Err() == nil {
			err = fmt.Errorf("response not complete within %s: %w", limit, err)
		}
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(buf))
	return resp, nil
}

// cancelBody ends the attempt's context when the caller closes the body.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// decodeResource reads a job resource from a buffered response.
func decodeResource(resp *http.Response) (*api.Resource, error) {
	defer resp.Body.Close()
	var res api.Resource
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, fmt.Errorf("%w: job resource: %v", ErrUnexpectedResponse, err)
	}
	if res.ID == "" || !res.State.Valid() {
		return nil, fmt.Errorf("%w: job resource without id or state", ErrUnexpectedResponse)
	}
	return &res, nil
}

// unexpected describes a response status the contract does not foresee for
// the call, as a problem if it is one.
func (c *Client) unexpected(resp *http.Response) error {
	if resp.StatusCode >= 400 {
		return problemFrom(resp, c.clock.Now())
	}
	resp.Body.Close()
	return fmt.Errorf("%w: HTTP %d", ErrUnexpectedResponse, resp.StatusCode)
}
