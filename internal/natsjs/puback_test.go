package natsjs

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// The stream's answers to a publish read the same through the fast path as
// through encoding/json, and errors stay API errors.
func TestAPublishAnswerIsRead(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		data string
		want *jetstream.PubAck
		fast bool
	}{
		{`{"stream":"JOBGATE_EVENTS","seq":42}`, &jetstream.PubAck{Stream: "JOBGATE_EVENTS", Sequence: 42}, true},
		{`{"stream":"JOBGATE_WORK","seq":7,"duplicate": true}`, &jetstream.PubAck{Stream: "JOBGATE_WORK", Sequence: 7, Duplicate: true}, true},
		{`{"stream":"S","domain":"hub","seq":3}`, &jetstream.PubAck{Stream: "S", Domain: "hub", Sequence: 3}, false},
		{`{"stream":"S","seq":3,"duplicate":true}`, &jetstream.PubAck{Stream: "S", Sequence: 3, Duplicate: true}, false},
		{`{"stream":"S","seq":3,"batch":"b","count":2}`, &jetstream.PubAck{Stream: "S", Sequence: 3}, false},
	} {
		ack, fast := fastPubAck([]byte(c.data))
		require.Equal(t, c.fast, fast, c.data)
		if fast {
			require.Equal(t, c.want, ack, c.data)
		}
		got, err := readPubAck([]byte(c.data))
		require.NoError(t, err, c.data)
		require.Equal(t, c.want, got, c.data)
	}

	_, err := readPubAck([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"S","seq":0}`))
	var api *jetstream.APIError
	require.True(t, errors.As(err, &api), "an API error: %v", err)
	require.Equal(t, jetstream.ErrorCode(10071), api.ErrorCode)
	require.True(t, wrongLastSequence(err))

	for _, bad := range []string{``, `{`, `{"stream":"","seq":1}`, `{"stream":"S","seq":}`, `{"seq":1}`, `null`} {
		_, err := readPubAck([]byte(bad))
		require.ErrorIs(t, err, jetstream.ErrInvalidJSAck, bad)
	}
}
