package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/client"
)

// runWatch is `jobgate watch ID`: one line per change until the job is
// finished (events when the gateway streams them, else long-polls). The exit
// code says how it ended: 0 succeeded, 3 failed, 4 canceled. `watch --all`
// follows every job of the caller on one stream (GET /v1/events), one line
// per change with its event id first, until interrupted (exit 0).
func (m *Main) runWatch(ctx context.Context, args []string) error {
	fs := newFlagSet("watch", m)
	cf := bindClientFlags(fs, 2*time.Minute)
	asJSON := fs.Bool("json", false, "print each version of the job resource as one JSON line")
	all := fs.Bool("all", false, "every change of all your jobs, on one stream, until interrupted (no job id)")
	after := fs.String("after", "", "with --all: resume right after this event id (printed with each line)")
	pos, err := parseArgs(fs, args, 0, 1, "one job id, or --all")
	if err != nil {
		return err
	}
	if *all != (len(pos) == 0) {
		return &usageError{"watch: give one job id, or --all"}
	}
	if *after != "" && !*all {
		return &usageError{"watch: --after needs --all"}
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	if *all {
		// Until Ctrl-C: a dropped connection resumes after the last event
		// printed (Last-Event-ID), nothing missed or repeated.
		err := c.Events(ctx, *after, func(ev client.Event) error {
			if *asJSON {
				return jsonEncoder(m.Stdout).Encode(struct {
					ID  string        `json:"event_id"`
					Job *job.Resource `json:"job"`
				}{ev.ID, ev.Job})
			}
			_, err := fmt.Fprintf(m.Stdout, "%s  %s  %s\n", ev.ID, ev.Job.ID, watchLine(ev.Job))
			return err
		})
		return classify("watch --all", err)
	}
	var printErr error
	res, err := c.Wait(ctx, pos[0], func(r *job.Resource) {
		if *asJSON {
			if err := printJSONLine(m, r); err != nil && printErr == nil {
				printErr = err
			}
			return
		}
		fmt.Fprintln(m.Stdout, watchLine(r))
	})
	if err != nil {
		return classify("watch "+pos[0], err)
	}
	if printErr != nil {
		return classify("watch", printErr)
	}
	if res.State != job.StateSucceeded {
		return classify("", &jobOutcomeError{res})
	}
	return nil
}

func printJSONLine(m *Main, r *job.Resource) error {
	return jsonEncoder(m.Stdout).Encode(r)
}

// watchLine is one line of watch: time, state, attempt, progress, outcome.
func watchLine(r *job.Resource) string {
	s := fmt.Sprintf("%s  %-9s", r.UpdatedAt.Local().Format(time.TimeOnly), r.State)
	if r.Attempt > 0 {
		s += fmt.Sprintf("  attempt %d", r.Attempt)
	}
	if r.Progress != nil {
		s += "  " + progressText(r.Progress)
	}
	if r.RetryAt != nil {
		s += "  retry at " + r.RetryAt.Local().Format(time.TimeOnly)
	}
	if r.Error != nil {
		s += fmt.Sprintf("  %s: %s", r.Error.Category, r.Error.Message)
	}
	if r.Result != nil {
		s += fmt.Sprintf("  result %d bytes (jobgate fetch %s)", r.Result.Size, r.ID)
	}
	return s
}
