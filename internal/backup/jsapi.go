package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
)

// The JetStream API of stream snapshots and restores, which nats.go does
// not wrap: the server streams a snapshot's chunks to a subject of the
// client's, each acknowledged for flow control, and takes a restore's
// chunks as requests, each answered.
const (
	apiSnapshot = "$JS.API.STREAM.SNAPSHOT."
	apiRestore  = "$JS.API.STREAM.RESTORE."
	apiInfo     = "$JS.API.STREAM.INFO."
	// chunkSize is what a snapshot's and a restore's chunks hold.
	chunkSize = 128 << 10
	// chunkWait bounds the wait for one chunk or one chunk's answer.
	chunkWait = 30 * time.Second
)

// apiError is the error member of a JetStream API answer.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("jetstream: %s (%d, %d)", e.Description, e.Code, e.ErrCode)
}

// errStreamNotFound is JetStream's "stream not found".
const errStreamNotFound = 10059

// request sends a JetStream API request and decodes its answer into out,
// returning the answer's error member as an *apiError.
func request(ctx context.Context, nc *nats.Conn, subject string, body any, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, chunkWait)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, subject, data)
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	var head struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &head); err != nil {
		return fmt.Errorf("%s: answer: %w", subject, err)
	}
	if head.Error != nil {
		return head.Error
	}
	if out != nil {
		if err := json.Unmarshal(msg.Data, out); err != nil {
			return fmt.Errorf("%s: answer: %w", subject, err)
		}
	}
	return nil
}

// snapshotAnswer is the server's answer to a snapshot request: the
// stream's configuration and state when the snapshot was taken.
type snapshotAnswer struct {
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
}

// snapshot writes stream's snapshot (with its consumers) to w.
func snapshot(ctx context.Context, nc *nats.Conn, stream string, w io.Writer) (*snapshotAnswer, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	var ans snapshotAnswer
	req := map[string]any{"deliver_subject": inbox, "chunk_size": chunkSize}
	if err := request(ctx, nc, apiSnapshot+stream, req, &ans); err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", stream, err)
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, chunkWait)
		msg, err := sub.NextMsgWithContext(cctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("snapshot of %s: waiting for a chunk: %w", stream, err)
		}
		if len(msg.Data) == 0 {
			// The end: status 204, or the server's reason for stopping.
			if st := msg.Header.Get("Status"); st != "" && st != "204" {
				return nil, fmt.Errorf("snapshot of %s: the server stopped it: %s %s", stream, st, msg.Header.Get("Description"))
			}
			return &ans, nil
		}
		if _, err := w.Write(msg.Data); err != nil {
			return nil, fmt.Errorf("snapshot of %s: %w", stream, err)
		}
		if msg.Reply != "" {
			if err := msg.Respond(nil); err != nil {
				return nil, fmt.Errorf("snapshot of %s: acknowledging a chunk: %w", stream, err)
			}
		}
	}
}

// restore creates stream from a snapshot: its configuration and state as
// the snapshot's answer gave them, and its bytes from r.
func restore(ctx context.Context, nc *nats.Conn, stream string, config, state json.RawMessage, r io.Reader) error {
	var ans struct {
		DeliverSubject string `json:"deliver_subject"`
	}
	req := map[string]json.RawMessage{"config": config, "state": state}
	if err := request(ctx, nc, apiRestore+stream, req, &ans); err != nil {
		return fmt.Errorf("restore of %s: %w", stream, err)
	}
	if ans.DeliverSubject == "" {
		return fmt.Errorf("restore of %s: the server named no subject for the chunks", stream)
	}
	buf := make([]byte, chunkSize)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if err := sendChunk(ctx, nc, ans.DeliverSubject, buf[:n]); err != nil {
				return fmt.Errorf("restore of %s: %w", stream, err)
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("restore of %s: reading the snapshot: %w", stream, rerr)
		}
	}
	// An empty chunk ends the transfer; the answer comes once the stream
	// is built, which takes as long as the stream is large.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, ans.DeliverSubject, nil)
	if err != nil {
		return fmt.Errorf("restore of %s: the end: %w", stream, err)
	}
	var done struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &done); err != nil {
		return fmt.Errorf("restore of %s: the end: %w", stream, err)
	}
	if done.Error != nil {
		return fmt.Errorf("restore of %s: %w", stream, done.Error)
	}
	return nil
}

func sendChunk(ctx context.Context, nc *nats.Conn, subject string, chunk []byte) error {
	cctx, cancel := context.WithTimeout(ctx, chunkWait)
	defer cancel()
	msg, err := nc.RequestWithContext(cctx, subject, chunk)
	if err != nil {
		return fmt.Errorf("sending a chunk: %w", err)
	}
	if len(msg.Data) > 0 {
		var ans struct {
			Error *apiError `json:"error"`
		}
		if json.Unmarshal(msg.Data, &ans) == nil && ans.Error != nil {
			return ans.Error
		}
	}
	return nil
}

// exists reports whether the server has stream.
func exists(ctx context.Context, nc *nats.Conn, stream string) (bool, error) {
	err := request(ctx, nc, apiInfo+stream, map[string]any{}, nil)
	var ae *apiError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ae) && ae.ErrCode == errStreamNotFound:
		return false, nil
	}
	return false, err
}
