package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/schollz/progressbar/v3"
)

// paramFlags collects repeated --param name=value flags. Values that read as
// JSON numbers, booleans, objects, arrays or quoted strings are sent as such;
// anything else is sent as a string.
type paramFlags map[string]any

func (p paramFlags) String() string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (p paramFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=value, got %q", s)
	}
	if _, dup := p[name]; dup {
		return fmt.Errorf("param %q given twice", name)
	}
	p[name] = paramValue(value)
	return nil
}

func paramValue(v string) any {
	if _, err := strconv.ParseFloat(v, 64); err == nil && v != "" && !strings.ContainsAny(v, "xXnN_") {
		return json.Number(v)
	}
	switch v {
	case "true":
		return true
	case "false":
		return false
	}
	if len(v) > 0 && strings.ContainsRune(`{["`, rune(v[0])) && json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	return v
}

// runSubmit is `jobgate submit`: it prints the job id as soon as the
// gateway has it and, with --wait, follows the job with a progress bar and
// downloads the result. The key comes from --key, or from an unfinished
// identical submission in the journal (so re-running a command that was
// killed finds its job), or is new.
func (m *Main) runSubmit(ctx context.Context, args []string) error {
	fs := newFlagSet("submit", m)
	cf := bindClientFlags(fs, 2*time.Minute)
	typ := fs.String("type", "permit_report", "job type")
	params := paramFlags{}
	fs.Var(params, "param", "job parameter name=value (repeatable)")
	key := fs.String("key", "", "your own idempotency key (1-255 printable ASCII); default: from the journal or new")
	fresh := fs.Bool("new", false, "a deliberate new job even if an identical submission is unfinished")
	wait := fs.Bool("wait", false, "follow the job with a progress bar and download its result")
	out := fs.String("out", "", "file or directory where --wait saves the result (default <job id> and the extension of the result's content type, e.g. .pdf or .csv); implies --wait")
	if _, err := parseArgs(fs, args, 0, 0, "no arguments (use --type and --param)"); err != nil {
		return err
	}
	if *key != "" && *fresh {
		return &usageError{"submit: --key and --new exclude each other"}
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	var opts []client.SubmitOption
	if *key != "" {
		opts = append(opts, client.WithKey(*key))
	}
	if *fresh {
		opts = append(opts, client.WithFreshKey())
	}
	sub, err := c.Submit(ctx, *typ, map[string]any(params), opts...)
	if err != nil {
		return classify("submit", err)
	}
	fmt.Fprintln(m.Stdout, sub.Job.ID)
	if !cf.quiet {
		switch {
		case sub.Reused:
			fmt.Fprintf(m.Stderr, "same request as an earlier submit that was interrupted: resumed with its key, no second job (job %s)\n", sub.Job.State)
		case sub.Replayed:
			fmt.Fprintf(m.Stderr, "the server already had this request: existing job, no second one (job %s)\n", sub.Job.State)
		case !*fresh:
			if prev := earlierIdentical(c, sub); prev != nil {
				fmt.Fprintf(m.Stderr, "new job: the same request was submitted before as %s (last seen %s) and that submit "+
					"had finished, so this is a second job; jobgate status %s shows the first\n", prev.JobID, prev.JobState, prev.JobID)
			}
		}
	}
	if !*wait && *out == "" {
		// The id is what this command promised; the logical request is
		// done, so the same command run again is a new job.
		if j := c.Journal(); j != nil {
			if err := j.Settle(sub.Key); err != nil && !cf.quiet {
				fmt.Fprintf(m.Stderr, "warning: %v\n", err)
			}
		}
		return nil
	}
	res, err := m.follow(ctx, c, sub.Job, !cf.quiet)
	if err != nil {
		return classify("submit", err)
	}
	path, err := m.fetchTo(ctx, c, res.ID, *out, cf.quiet)
	if err != nil {
		return classify("submit", err)
	}
	fmt.Fprintln(m.Stdout, path)
	return nil
}

// earlierIdentical finds, in the journal, the newest earlier submission of
// the same request by the same identity that got its job: the journal
// resumes only unfinished submissions, so a repeat of a finished one is a
// new job, and the user should hear that it is.
func earlierIdentical(c *client.Client, sub *client.Submission) *client.Entry {
	j := c.Journal()
	if j == nil {
		return nil
	}
	entries, err := j.Entries("")
	if err != nil {
		return nil
	}
	var mine *client.Entry
	for i := range entries {
		if entries[i].Key == sub.Key {
			mine = &entries[i]
		}
	}
	if mine == nil {
		return nil
	}
	var prev *client.Entry
	for i := range entries {
		e := &entries[i]
		if e.Key != mine.Key && e.Scope == mine.Scope && e.Fingerprint == mine.Fingerprint && e.JobID != "" && e.JobID != sub.Job.ID {
			prev = e // oldest first: the last match is the newest
		}
	}
	return prev
}

// follow waits for a job to finish, showing a progress bar on stderr fed
// by the job's own progress. A job that did not succeed is an error.
func (m *Main) follow(ctx context.Context, c *client.Client, start *job.Resource, show bool) (*job.Resource, error) {
	var bar *progressbar.ProgressBar
	update := func(r *job.Resource) {}
	if show {
		bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(m.Stderr),
			progressbar.OptionSetDescription(describe(start)),
			progressbar.OptionSetSpinnerChangeInterval(0), // render on updates only
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("pages"),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetRenderBlankState(true),
		)
		var max int64 = -1
		update = func(r *job.Resource) {
			bar.Describe(describe(r))
			if p := r.Progress; p != nil && p.Total > 0 {
				if int64(p.Total) != max {
					max = int64(p.Total)
					bar.ChangeMax64(max)
				}
				_ = bar.Set64(int64(p.Done))
			}
			if r.State == job.StateSucceeded && max > 0 {
				_ = bar.Finish()
			}
		}
	}
	res, err := c.Wait(ctx, start.ID, update)
	if bar != nil {
		_ = bar.Exit()
		fmt.Fprintln(m.Stderr)
	}
	if err != nil {
		return nil, err
	}
	if res.State != job.StateSucceeded {
		return res, &jobOutcomeError{res}
	}
	return res, nil
}

// describe is the progress bar's label for a job version.
func describe(r *job.Resource) string {
	s := string(r.State)
	if r.State == job.StateRunning && r.Attempt > 1 {
		s += fmt.Sprintf(" (attempt %d)", r.Attempt)
	}
	if r.RetryAt != nil {
		s += ", retry at " + r.RetryAt.Local().Format(time.TimeOnly)
	}
	return fmt.Sprintf("%-22s", s)
}
