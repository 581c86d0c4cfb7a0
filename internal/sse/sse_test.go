package sse_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/internal/sse"
	"github.com/stretchr/testify/require"
)

func TestRead(t *testing.T) {
	t.Parallel()
	stream := ": hello\r\n\r\nid: 3\r\nevent: job\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n" +
		"event: job\ndata:{\"b\":2}\n\n: keep-alive\n\nid: 9\nevent: error\ndata: {\"detail\":\"x\"}\n\n" +
		"event: job\ndata: {\"unterminated\":true}"
	var got []sse.Event
	lines := 0
	err := sse.Read(strings.NewReader(stream), func() { lines++ }, func(ev sse.Event) (bool, error) {
		got = append(got, ev)
		return false, nil
	})
	require.NoError(t, err)
	require.Len(t, got, 3, "an event without its blank line is not dispatched")
	require.Equal(t, sse.Event{ID: "3", Name: "job", Data: []byte("{\"a\":\n1}")}, got[0])
	require.Equal(t, "{\"b\":2}", string(got[1].Data))
	require.Empty(t, got[1].ID)
	require.Equal(t, "error", got[2].Name)
	require.Equal(t, "9", got[2].ID)
	require.Greater(t, lines, 10)
}

func TestReadStops(t *testing.T) {
	t.Parallel()
	stream := "data: 1\n\ndata: 2\n\ndata: 3\n\n"
	n := 0
	err := sse.Read(strings.NewReader(stream), nil, func(ev sse.Event) (bool, error) {
		n++
		return string(ev.Data) == "2", nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, n, "stop ends the read")
	boom := errors.New("boom")
	err = sse.Read(strings.NewReader(stream), nil, func(sse.Event) (bool, error) { return false, boom })
	require.ErrorIs(t, err, boom)
}
