package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// follow reads a job's event stream and calls onState with the state of
// every job event until it returns true, the stream ends or ctx is done.
// opened is called once the stream's response headers arrived.
func (a *api) follow(ctx context.Context, tok, id, lastEventID string, opened func(), onState func(state, eventID string) bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/v1/jobs/"+id+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", tok)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := a.std.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("events: status %d", resp.StatusCode)
	}
	if opened != nil {
		opened()
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 8192), 1<<20)
	var event, eventID string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			event = ""
		case strings.HasPrefix(line, "event: "):
			event = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			eventID = line[len("id: "):]
		case strings.HasPrefix(line, "data: ") && event == "job":
			var j struct {
				State string `json:"state"`
			}
			if err := json.Unmarshal([]byte(line[len("data: "):]), &j); err != nil {
				return fmt.Errorf("events: %w", err)
			}
			if onState(j.State, eventID) {
				return nil
			}
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

func terminal(state string) bool {
	return state == "succeeded" || state == "failed" || state == "canceled"
}
