package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/valyala/fasthttp"
)

// api is the load generator's view of a gateway. The hot paths use
// fasthttp's client, the cheapest Go HTTP/1.1 client, so as much of the
// shared CPU as possible is left to the server; streams use net/http.
type api struct {
	base   string
	hc     *fasthttp.HostClient
	std    *http.Client
	secret []byte
	tenant string
	mu     sync.Mutex
	tokens map[string]string
}

func newAPI(base string, conns int, secret []byte, tenant string) (*api, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || u.Scheme != "http" {
		return nil, fmt.Errorf("bench: gateway URL %q: want http://host:port", base)
	}
	// Idle connections close before the gateway's 40s read timeout, which answers a
	// connection that never carried a request with a 400 (fasthttp).
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 30 * time.Second}
	return &api{
		base: strings.TrimRight(base, "/"),
		hc: &fasthttp.HostClient{
			Addr: u.Host, MaxConns: conns, MaxConnWaitTimeout: time.Minute,
			ReadTimeout: 40 * time.Second, WriteTimeout: 10 * time.Second,
			MaxIdleConnDuration: time.Minute, NoDefaultUserAgentHeader: true,
		},
		std:    &http.Client{Transport: tr},
		secret: secret, tenant: tenant, tokens: map[string]string{},
	}, nil
}

// token returns a bearer token for requester of the bench tenant.
func (a *api) token(requester string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.tokens[requester]; ok {
		return t
	}
	t, err := auth.Mint(a.secret, auth.Identity{Tenant: a.tenant, Requester: requester}, 6*time.Hour, time.Now())
	if err != nil {
		panic(err) // requester names are the bench's own and valid
	}
	a.tokens[requester] = "Bearer " + t
	return a.tokens[requester]
}

// submit POSTs a job; it returns the status and the job id from Location.
func (a *api) submit(tok, key string, body []byte) (int, string, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(a.base + "/v1/jobs")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.Set("Authorization", tok)
	req.Header.Set("Idempotency-Key", key)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
	if err := a.hc.Do(req, resp); err != nil {
		return 0, "", err
	}
	loc := string(resp.Header.Peek("Location"))
	return resp.StatusCode(), strings.TrimPrefix(loc, "/v1/jobs/"), nil
}

// getResult is what a status read returned.
type getResult struct {
	status     int
	etag       string
	retryAfter int
}

// get reads a path, optionally with If-None-Match.
func (a *api) get(tok, path, inm string) (getResult, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(a.base + path)
	req.Header.Set("Authorization", tok)
	if inm != "" {
		req.Header.Set("If-None-Match", inm)
	}
	if err := a.hc.Do(req, resp); err != nil {
		return getResult{}, err
	}
	r := getResult{status: resp.StatusCode(), etag: string(resp.Header.Peek("ETag"))}
	r.retryAfter, _ = strconv.Atoi(string(resp.Header.Peek("Retry-After")))
	return r, nil
}

// closedLoop runs op from workers goroutines back to back until d passes
// (d > 0) or limit operations ran (limit > 0), and summarizes the
// latencies. An op error counts as a failed operation.
func closedLoop(ctx context.Context, workers int, d time.Duration, limit int64, op func(w, n int) error) Summary {
	return closedLoopSamples(ctx, workers, d, limit, op).Summary()
}

// closedLoopSamples is closedLoop returning the raw samples.
func closedLoopSamples(ctx context.Context, workers int, d time.Duration, limit int64, op func(w, n int) error) Samples {
	recs := make([]*recorder, workers)
	var issued atomic.Int64
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		rec := &recorder{lat: make([]time.Duration, 0, 4096)}
		recs[w] = rec
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				if d > 0 && !time.Now().Before(deadline) {
					return
				}
				if limit > 0 && issued.Add(1) > limit {
					return
				}
				t0 := time.Now()
				if err := op(w, n); err != nil {
					rec.fail(err.Error())
					continue
				}
				rec.lat = append(rec.lat, time.Since(t0))
			}
		})
	}
	wg.Wait()
	return collect(recs, time.Since(start))
}

// pacedLoop issues op at a fixed rate for d from up to workers goroutines
// (open loop). Latency is measured from each operation's scheduled start,
// so a stall that delays later requests counts against them too (no
// coordinated omission).
func pacedLoop(ctx context.Context, workers int, rate float64, d time.Duration, op func(w, n int) error) Summary {
	recs := make([]*recorder, workers)
	var ticket atomic.Int64
	start := time.Now()
	total := int64(rate * d.Seconds())
	var wg sync.WaitGroup
	for w := range workers {
		rec := &recorder{}
		recs[w] = rec
		wg.Go(func() {
			for ctx.Err() == nil {
				i := ticket.Add(1) - 1
				if i >= total {
					return
				}
				at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
				if wait := time.Until(at); wait > 0 {
					time.Sleep(wait)
				}
				if err := op(w, int(i)); err != nil {
					rec.fail(err.Error())
					continue
				}
				rec.lat = append(rec.lat, time.Since(at))
			}
		})
	}
	wg.Wait()
	return collect(recs, time.Since(start)).Summary()
}

// expect turns an unexpected status into an error.
func expect(status, want int, err error) error {
	if err != nil {
		return err
	}
	if status != want {
		return fmt.Errorf("status %d, want %d", status, want)
	}
	return nil
}
