package egress

import (
	"net/http"
	"time"
)

// MaxResponseHeaderBytes bounds the header of an answer to a request of
// NewClient's.
const MaxResponseHeaderBytes = 64 << 10

// NewClient is the pooled client of requests to users' URLs (webhooks,
// endpoint types): keep-alive with up to idlePerHost idle connections a
// host, HTTP/2 when the server offers it, no proxy from the environment
// (the address check must see the real target), no redirects (a 3xx is
// the answer), TLS verified (the default), every connection's address
// checked against p, answers' headers bounded. timeout bounds a whole
// request; 0 leaves it to the request's context.
func NewClient(p Policy, timeout time.Duration, idlePerHost int) *http.Client {
	dialer := Dialer(p, 10*time.Second)
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           max(100, 4*idlePerHost),
			MaxIdleConnsPerHost:    idlePerHost,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    10 * time.Second,
			ExpectContinueTimeout:  time.Second,
			MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
