package client

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReadEvents(t *testing.T) {
	t.Parallel()
	stream := ": hello\r\n\r\nid: 3\r\nevent: job\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n" +
		"event: job\ndata:{\"b\":2}\n\n: keep-alive\n\nid: 9\nevent: error\ndata: {\"detail\":\"x\"}\n\n" +
		"event: job\ndata: {\"unterminated\":true}"
	var got []sseEvent
	lines := 0
	err := readEvents(strings.NewReader(stream), func() { lines++ }, func(ev sseEvent) (bool, error) {
		got = append(got, ev)
		return false, nil
	})
	require.NoError(t, err)
	require.Len(t, got, 3, "an event without its blank line is not dispatched")
	require.Equal(t, sseEvent{id: "3", name: "job", data: []byte("{\"a\":\n1}")}, got[0])
	require.Equal(t, "{\"b\":2}", string(got[1].data))
	require.Equal(t, "error", got[2].name)
	require.Equal(t, "9", got[2].id)
	require.Greater(t, lines, 10)
}

func TestProblemParsing(t *testing.T) {
	t.Parallel()
	resp := &http.Response{StatusCode: 502, Header: http.Header{"Content-Type": {"text/html"}},
		Body: nopBody("<html>Bad gateway from the proxy</html>\nmore")}
	err := problemFrom(resp, time.Now())
	require.Equal(t, "<html>Bad gateway from the proxy</html> (502)", err.Error())

	resp = &http.Response{StatusCode: 409, Header: http.Header{"Content-Type": {"application/problem+json"}},
		Body: nopBody(`{"type":"/problems/idempotency-key-reused","title":"t","status":409,"detail":"key used for job_abcdefghijklmnopqrstuvwxyz with another request"}`)}
	err = problemFrom(resp, time.Now())
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "job_abcdefghijklmnopqrstuvwxyz", ce.JobID, "a job named only in the detail is still found")
}

type body struct{ *strings.Reader }

func (body) Close() error { return nil }

func nopBody(s string) body { return body{strings.NewReader(s)} }
