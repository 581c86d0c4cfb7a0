package natsjs

import (
	"encoding/json"
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

// Whatever the answer, the fast path reads only what encoding/json reads
// the same way.
func FuzzPubAck(f *testing.F) {
	for _, s := range []string{`{"stream":"S","seq":42}`, `{"stream":"S","seq":7,"duplicate": true}`,
		`{"stream":"S","domain":"d","seq":3}`, `{"error":{"code":503,"description":"x"}}`, `{"stream":"S\"","seq":1}`,
		`{"stream":"S","seq":1}x`, `{"stream":"S","seq":01}`, `{"stream":"S","seq":1,"duplicate": true}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ack, ok := fastPubAck(data)
		if !ok {
			return
		}
		var want struct {
			Error *jetstream.APIError `json:"error,omitempty"`
			*jetstream.PubAck
		}
		require.NoError(t, json.Unmarshal(data, &want), "%q read fast but not as JSON", data)
		require.Nil(t, want.Error)
		require.Equal(t, want.PubAck, ack, "%q", data)
	})
}
