package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// runStatus is `jobgate status ID`: one read of the job.
func (m *Main) runStatus(ctx context.Context, args []string) error {
	fs := newFlagSet("status", m)
	cf := bindClientFlags(fs, 30*time.Second)
	asJSON := fs.Bool("json", false, "print the job resource as JSON")
	pos, err := parseArgs(fs, args, 1, 1, "one job id")
	if err != nil {
		return err
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	res, err := c.Get(ctx, pos[0])
	if err != nil {
		return classify("status "+pos[0], err)
	}
	if *asJSON {
		return printJSON(m.Stdout, res)
	}
	printJob(m.Stdout, res)
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJob writes the human view of a job.
func printJob(w io.Writer, r *job.Resource) {
	line := func(k, format string, a ...any) {
		if k != "" {
			k += ":"
		}
		fmt.Fprintf(w, "%-10s "+format+"\n", append([]any{k}, a...)...)
	}
	line("id", "%s", r.ID)
	line("type", "%s %s", r.Type, r.Params)
	state := string(r.State)
	if r.Attempt > 0 {
		state += fmt.Sprintf(" (attempt %d)", r.Attempt)
	}
	line("state", "%s", state)
	if p := r.Progress; p != nil {
		line("progress", "%s", progressText(p))
	}
	if r.RetryAt != nil {
		line("retry at", "%s", stamp(*r.RetryAt))
	}
	line("created", "%s", stamp(r.CreatedAt))
	if r.StartedAt != nil {
		line("started", "%s", stamp(*r.StartedAt))
	}
	if r.FinishedAt != nil {
		line("finished", "%s", stamp(*r.FinishedAt))
	}
	if e := r.Error; e != nil {
		retry := ""
		if e.Retryable {
			retry = " (retryable)"
		}
		line("error", "%s: %s%s", e.Category, e.Message, retry)
	}
	if res := r.Result; res != nil {
		line("result", "%s, %d bytes, sha256 %s", res.ContentType, res.Size, res.SHA256)
		line("", "jobgate fetch %s", r.ID)
	}
}

func progressText(p *job.Progress) string {
	if p.Total > 0 {
		return fmt.Sprintf("%d/%d %s (%d%%)", p.Done, p.Total, p.Unit, p.Done*100/p.Total)
	}
	return fmt.Sprintf("%d %s", p.Done, p.Unit)
}

// stamp shows a time in the local zone, as RFC 3339 with its offset, so a
// copied line means the same instant anywhere.
func stamp(t time.Time) string { return t.Local().Format(time.RFC3339) }
