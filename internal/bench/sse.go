package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/jobgate/jobgate/internal/sse"
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
	var eventID string
	err = sse.Read(resp.Body, nil, func(ev sse.Event) (bool, error) {
		if ev.ID != "" {
			eventID = ev.ID
		}
		if ev.Name != "job" {
			return false, nil
		}
		var j struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal(ev.Data, &j); err != nil {
			return false, fmt.Errorf("events: %w", err)
		}
		return onState(j.State, eventID), nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func terminal(state string) bool {
	return state == "succeeded" || state == "failed" || state == "canceled"
}
