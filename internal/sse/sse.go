// Package sse reads Server-Sent Events streams (the WHATWG format): the
// one parser of the job event streams, shared by the HTTP client (pkg/client)
// and the load generator (internal/bench).
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

// Event is one dispatched event.
type Event struct {
	ID   string // the id field of this event, "" if it had none
	Name string // the event field; "" means the default "message"
	Data []byte // the data lines joined by "\n"
}

// Read parses an event stream and calls fn per event until fn says stop, fn
// fails or the stream ends (a clean end is nil). An event is dispatched by
// its blank line: one cut off before it is dropped. Lines starting with ':'
// are comments (keep-alives). seen, if not nil, is called on every line
// read, comments included, so a caller can tell a quiet stream from a dead
// one.
func Read(r io.Reader, seen func(), fn func(Event) (stop bool, err error)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		ev   Event
		data bytes.Buffer
		has  bool
	)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 && seen != nil {
			seen()
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if has {
				ev.Data = bytes.Clone(bytes.TrimSuffix(data.Bytes(), []byte("\n")))
				stop, ferr := fn(ev)
				if ferr != nil || stop {
					return ferr
				}
			}
			ev, has = Event{}, false
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Name, has = value, true
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			has = true
		case "id":
			ev.ID = value
		}
	}
}
