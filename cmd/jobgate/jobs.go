package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// runJobs is `jobgate jobs`: a table of the caller's own jobs, newest first.
func (m *Main) runJobs(ctx context.Context, args []string) error {
	fs := newFlagSet("jobs", m)
	cf := bindClientFlags(fs, 30*time.Second)
	state := fs.String("state", "", "only jobs in this state (queued, running, succeeded, failed, canceled)")
	limit := fs.Int("limit", 20, "jobs per page (1-100)")
	cursor := fs.String("cursor", "", "continue after a previous page")
	all := fs.Bool("all", false, "follow every page")
	asJSON := fs.Bool("json", false, "print one JSON job resource per line")
	if _, err := parseArgs(fs, args, 0, 0, "no arguments"); err != nil {
		return err
	}
	if *state != "" && !job.State(*state).Valid() {
		return &usageError{fmt.Sprintf("jobs: --state %q is not a job state", *state)}
	}
	if *limit < 1 || *limit > 100 {
		return &usageError{"jobs: --limit must be 1 to 100"}
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "ID\tSTATE\tATTEMPT\tPROGRESS\tTYPE\tCREATED")
	}
	count := 0
	next := *cursor
	for {
		page, err := c.List(ctx, job.State(*state), *limit, next)
		if err != nil {
			return classify("jobs", err)
		}
		for _, r := range page.Jobs {
			count++
			if *asJSON {
				if err := jsonEncoder(m.Stdout).Encode(r); err != nil {
					return classify("jobs", err)
				}
				continue
			}
			progress := "-"
			if r.Progress != nil {
				progress = progressText(r.Progress)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.State, r.Attempt, progress, r.Type, stamp(r.CreatedAt))
		}
		next = page.NextCursor
		if next == "" || !*all {
			break
		}
	}
	if err := tw.Flush(); err != nil {
		return classify("jobs", err)
	}
	if !cf.quiet {
		if count == 0 {
			fmt.Fprintln(m.Stderr, "no jobs")
		}
		if next != "" {
			// The hint repeats the page's filters: a cursor is only valid
			// with the same state and limit.
			more := fmt.Sprintf("jobgate jobs --limit %d", *limit)
			if *state != "" {
				more += " --state " + *state
			}
			fmt.Fprintf(m.Stderr, "more: %s --cursor %s (or --all)\n", more, next)
		}
	}
	return nil
}

func jsonEncoder(w io.Writer) *json.Encoder { return json.NewEncoder(w) }
