package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// openStream starts an event stream and leaves it open until the test ends.
func (b *testBundle) openStream(t *testing.T, tok, id string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/v1/jobs/"+id+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp
}

func TestEventStreamsPerRequesterAreCapped(t *testing.T) {
	t.Parallel()
	g, b := setup(t, func(c *Config) { c.MaxStreamsPerRequester, c.StreamHeartbeat = 2, 20*time.Millisecond })
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID

	first := b.openStream(t, tok, id)
	require.Equal(t, http.StatusOK, first.StatusCode)
	require.Equal(t, http.StatusOK, b.openStream(t, tok, id).StatusCode)
	over := b.openStream(t, tok, id)
	require.Equal(t, http.StatusTooManyRequests, over.StatusCode)
	require.Equal(t, "5", over.Header.Get("Retry-After"))
	require.Equal(t, "application/problem+json", over.Header.Get("Content-Type"))
	require.EqualValues(t, 2, g.SSEStreams())

	other := b.token(t, "4", "reviewer-48", true) // an admin of the tenant: its own cap
	require.Equal(t, http.StatusOK, b.openStream(t, other, id).StatusCode)

	// A closed stream gives its slot back (noticed at the next heartbeat).
	first.Body.Close()
	require.Eventually(t, func() bool { return g.SSEStreams() == 2 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, http.StatusOK, b.openStream(t, tok, id).StatusCode)
}

func TestLongPollsPerRequesterAreCapped(t *testing.T) {
	t.Parallel()
	g, b := setup(t, func(c *Config) { c.MaxLongPollsPerRequester = 1 })
	tok := b.token(t, "4", "reviewer-47", false)
	r := b.submit(t, tok, "k", permit)
	id, tag := r.job(t).ID, r.header.Get("ETag")
	if tag == "" {
		tag = b.do(t, http.MethodGet, "/v1/jobs/"+id, tok, "").header.Get("ETag")
	}
	waiting := make(chan int, 1)
	go func() {
		r, err := b.try(http.MethodGet, "/v1/jobs/"+id+"?wait=3s", tok, "", "If-None-Match: "+tag)
		if err != nil {
			waiting <- 0
			return
		}
		waiting <- r.status
	}()
	require.Eventually(t, func() bool {
		g.polls.mu.Lock()
		defer g.polls.mu.Unlock()
		return g.polls.requesters["4/reviewer-47"] == 1
	}, 10*time.Second, 5*time.Millisecond)
	over := b.do(t, http.MethodGet, "/v1/jobs/"+id+"?wait=3s", tok, "", "If-None-Match: "+tag)
	require.Equal(t, http.StatusTooManyRequests, over.status)
	require.Equal(t, "/problems/rate-limited", over.json(t)["type"])
	require.NotEmpty(t, over.header.Get("Retry-After"))
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs/"+id, tok, "").status, "a plain read is not a long-poll")
	require.Equal(t, http.StatusNotModified, <-waiting)
	require.Equal(t, http.StatusNotModified, b.do(t, http.MethodGet, "/v1/jobs/"+id+"?wait=1s", tok, "", "If-None-Match: "+tag).status,
		"the slot is free again")
}

// A client that opens a stream and stops reading is cut off once a write
// has waited the write deadline: its stream, goroutine and slot are freed.
func TestStalledStreamReaderIsCutOff(t *testing.T) {
	t.Parallel()
	g, b := setup(t, func(c *Config) {
		// Heartbeats every millisecond fill the small buffers in seconds.
		c.StreamHeartbeat, c.StreamWriteTimeout, c.MaxStreamsPerRequester = time.Millisecond, 300*time.Millisecond, 1
	})
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /v1/jobs/%s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", id, tok)
	require.NoError(t, err)
	// The client never reads.
	require.Eventually(t, func() bool { return g.SSEStreams() == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return g.SSEStreams() == 0 }, 60*time.Second, 10*time.Millisecond,
		"the stalled stream was never cut off")
	require.Equal(t, http.StatusOK, b.openStream(t, tok, id).StatusCode, "its slot is free again")
}

func TestCancelIsRateLimited(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.SubmitRate, c.SubmitBurst = 0.001, 3 })
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/jobs/"+id, tok, "").status)
	require.Equal(t, http.StatusConflict, b.do(t, http.MethodDelete, "/v1/jobs/"+id, tok, "").status)
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodDelete, "/v1/jobs/job_none", tok, "").status)
	r := b.do(t, http.MethodDelete, "/v1/jobs/"+id, tok, "")
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "/problems/rate-limited", r.json(t)["type"])
	require.NotEmpty(t, r.header.Get("Retry-After"))
	// Cancels have a bucket of their own: submissions still go through.
	require.Equal(t, http.StatusAccepted, b.submit(t, tok, "k2", permit).status)
	other := b.token(t, "4", "reviewer-48", false)
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodDelete, "/v1/jobs/"+id, other, "").status, "another requester is not limited")
}

// An event stream answers an HTTP/1.0 client, which knows no chunked
// encoding, with the events as they are, ended by the connection's close;
// an HTTP/1.1 client gets chunks (the standard clients of the other tests).
func TestAnEventStreamToAnHTTP10ClientIsNotChunked(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID
	for _, proto := range []string{"HTTP/1.0", "HTTP/1.1"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
		require.NoError(t, err)
		_, err = fmt.Fprintf(conn, "GET /v1/jobs/%s/events %s\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", id, proto, tok)
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		var got []byte
		buf := make([]byte, 4096)
		for !bytes.Contains(got, []byte("event: job")) {
			n, err := conn.Read(buf)
			require.NoError(t, err, "read so far: %q", got)
			got = append(got, buf[:n]...)
		}
		conn.Close()
		head, body, ok := bytes.Cut(got, []byte("\r\n\r\n"))
		require.True(t, ok, "%q", got)
		require.Contains(t, string(head), "200 OK")
		require.Contains(t, string(head), "Content-Type: text/event-stream")
		require.Contains(t, string(head), "\r\nDate: ")
		if proto == "HTTP/1.0" {
			require.NotContains(t, string(head), "Transfer-Encoding")
			require.True(t, bytes.HasPrefix(body, []byte("retry: ")), "%q", body)
		} else {
			require.Contains(t, string(head), "Transfer-Encoding: chunked")
			require.Regexp(t, `^[0-9a-f]+\r\nretry: `, string(body))
		}
	}
}

// HEAD on an event stream answers the head a GET would get and opens no
// stream.
func TestHeadOfAnEventStreamOpensNone(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID
	r := b.do(t, http.MethodHead, "/v1/jobs/"+id+"/events", tok, "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "text/event-stream", r.header.Get("Content-Type"))
	require.Zero(t, g.SSEStreams())
}

// streamer is one requester with a job of its own to watch.
type streamer struct{ tok, id string }

func (b *testBundle) streamer(t *testing.T, tenant, sub string) streamer {
	t.Helper()
	tok := b.token(t, tenant, sub, false)
	return streamer{tok, b.submit(t, tok, "k-"+sub, permit).job(t).ID}
}

func requireRefused(t *testing.T, r *http.Response, cap string) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, r.StatusCode)
	require.Equal(t, "5", r.Header.Get("Retry-After"))
	body, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	var p map[string]any
	require.NoError(t, json.Unmarshal(body, &p))
	require.Equal(t, "/problems/rate-limited", p["type"])
	require.Contains(t, p["detail"], cap)
}

func TestEventStreamsPerTenantAndPerServerAreCapped(t *testing.T) {
	t.Parallel()
	g, b := setup(t, func(c *Config) {
		c.MaxStreamsPerRequester, c.MaxStreamsPerTenant, c.MaxStreams, c.StreamHeartbeat = 2, 3, 5, 20*time.Millisecond
	})
	a1, a2, a3 := b.streamer(t, "4", "a1"), b.streamer(t, "4", "a2"), b.streamer(t, "4", "a3")
	first := b.openStream(t, a1.tok, a1.id)
	require.Equal(t, http.StatusOK, first.StatusCode)
	require.Equal(t, http.StatusOK, b.openStream(t, a1.tok, a1.id).StatusCode)
	require.Equal(t, http.StatusOK, b.openStream(t, a2.tok, a2.id).StatusCode)
	// Tenant 4 holds its 3, from requesters each under their own cap.
	requireRefused(t, b.openStream(t, a3.tok, a3.id), "this tenant has 3 event streams open")

	c1, c2 := b.streamer(t, "5", "c1"), b.streamer(t, "6", "c2")
	require.Equal(t, http.StatusOK, b.openStream(t, c1.tok, c1.id).StatusCode, "another tenant still gets its stream")
	require.Equal(t, http.StatusOK, b.openStream(t, c1.tok, c1.id).StatusCode)
	// The server holds its 5: a tenant with none open is refused too.
	requireRefused(t, b.openStream(t, c2.tok, c2.id), "this server has 5 event streams open")
	require.EqualValues(t, 5, g.SSEStreams())

	// A closed stream gives its slot back (noticed at the next heartbeat),
	// to its tenant and to the server.
	first.Body.Close()
	require.Eventually(t, func() bool { return g.streams.open() == 4 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, http.StatusOK, b.openStream(t, a3.tok, a3.id).StatusCode)
	requireRefused(t, b.openStream(t, c2.tok, c2.id), "this server")
}

func TestLongPollsPerTenantAndPerServerAreCapped(t *testing.T) {
	t.Parallel()
	g, b := setup(t, func(c *Config) { c.MaxLongPollsPerTenant, c.MaxLongPolls = 1, 2 })
	poll := func(s streamer, wait string) (response, error) {
		tag := b.do(t, http.MethodGet, "/v1/jobs/"+s.id, s.tok, "").header.Get("ETag")
		return b.try(http.MethodGet, "/v1/jobs/"+s.id+"?wait="+wait, s.tok, "", "If-None-Match: "+tag)
	}
	a1, a2, c1, d1 := b.streamer(t, "4", "a1"), b.streamer(t, "4", "a2"), b.streamer(t, "5", "c1"), b.streamer(t, "6", "d1")
	done := make(chan int, 2)
	for _, s := range []streamer{a1, c1} {
		go func() {
			r, err := poll(s, "3s")
			if err != nil {
				done <- 0
				return
			}
			done <- r.status
		}()
	}
	require.Eventually(t, func() bool { return g.polls.open() == 2 }, 10*time.Second, 5*time.Millisecond)
	over, err := poll(a2, "3s")
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, over.status, "tenant 4 has its one long-poll waiting")
	require.Contains(t, over.json(t)["detail"], "this tenant")
	over, err = poll(d1, "3s")
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, over.status, "the server has its two")
	require.Contains(t, over.json(t)["detail"], "this server")
	require.NotEmpty(t, over.header.Get("Retry-After"))
	require.Equal(t, http.StatusNotModified, <-done)
	require.Equal(t, http.StatusNotModified, <-done)
	require.Eventually(t, func() bool { return g.polls.open() == 0 }, 10*time.Second, 5*time.Millisecond)
	r, err := poll(a2, "100ms")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotModified, r.status, "the slots are free again")
}
