package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
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
	batch := fs.String("batch", "", "submit a batch: FILE holds one params JSON object per line (at most 1,000), each a job of --type, under one key")
	notify := fs.String("notify", "", "with --batch: batch (one notice when every job has ended, the default) or each (one per job)")
	runAt := fs.String("run-at", "", "schedule the job: no attempt before this RFC 3339 time (at most 30 days ahead)")
	delay := fs.Duration("delay", 0, "schedule the job this long after its admission (e.g. 90s, 2h30m)")
	priority := fs.Int("priority", 0, "1 (first) to 5 (last) among the tenant's waiting jobs of the type; default 3")
	startBy := fs.String("start-by", "", "cancel the job (deadline_exceeded) when no attempt has started by this RFC 3339 time")
	if _, err := parseArgs(fs, args, 0, 0, "no arguments (use --type and --param)"); err != nil {
		return err
	}
	flowOpts, err := flowOptions(*runAt, *delay, *priority, *startBy)
	if err != nil {
		return err
	}
	if *batch != "" && len(flowOpts) > 0 {
		return &usageError{"submit: --run-at, --delay, --priority and --start-by apply to one job, not to --batch"}
	}
	if *key != "" && *fresh {
		return &usageError{"submit: --key and --new exclude each other"}
	}
	if *batch == "" && *notify != "" {
		return &usageError{"submit: --notify needs --batch"}
	}
	if *batch != "" && (len(params) > 0 || *out != "") {
		return &usageError{"submit: --batch takes its params from the file; --param and --out do not apply"}
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
	opts = append(opts, flowOpts...)
	if *batch != "" {
		if *notify != "" {
			opts = append(opts, client.WithNotify(*notify))
		}
		return m.submitBatch(ctx, c, cf, *typ, *batch, *wait, opts)
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

// readBatchFile reads a --batch file: one params JSON object per line
// (blank lines skipped), at most api.MaxBatchItems of them, the file at
// most api's 1 MiB body bound.
func readBatchFile(path, typ string) ([]api.BatchItem, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &usageError{"submit: --batch: " + err.Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBatchFile+1))
	if err != nil {
		return nil, &usageError{"submit: --batch: " + err.Error()}
	}
	if len(data) > maxBatchFile {
		return nil, &usageError{"submit: --batch: the file is larger than 1 MiB"}
	}
	var items []api.BatchItem
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !json.Valid([]byte(line)) || line[0] != '{' {
			return nil, &usageError{fmt.Sprintf("submit: --batch: line %d is not one JSON object", n+1)}
		}
		if len(items) == api.MaxBatchItems {
			return nil, &usageError{fmt.Sprintf("submit: --batch: more than %d jobs", api.MaxBatchItems)}
		}
		items = append(items, api.BatchItem{Type: typ, Params: json.RawMessage(line)})
	}
	if len(items) == 0 {
		return nil, &usageError{"submit: --batch: the file holds no job"}
	}
	return items, nil
}

// maxBatchFile bounds a --batch file (the server takes 1 MiB bodies).
const maxBatchFile = 1 << 20

// submitBatch is `jobgate submit --batch FILE`: the batch id on stdout at
// once; with --wait one progress bar for the batch (jobs ended of all),
// then one line per job (id, state). Exit 0 when every job succeeded, else
// 3 (a job failed) or 4 (canceled, none failed).
func (m *Main) submitBatch(ctx context.Context, c *client.Client, cf *clientFlags, typ, path string, wait bool, opts []client.SubmitOption) error {
	items, err := readBatchFile(path, typ)
	if err != nil {
		return err
	}
	sub, err := c.SubmitBatch(ctx, items, opts...)
	if err != nil {
		return classify("submit", err)
	}
	fmt.Fprintln(m.Stdout, sub.Batch.ID)
	if !cf.quiet {
		switch {
		case sub.Reused:
			fmt.Fprintf(m.Stderr, "same batch as an earlier submit that was interrupted: resumed with its key, no second batch\n")
		case sub.Replayed:
			fmt.Fprintf(m.Stderr, "the server already had this batch: no second one\n")
		}
	}
	if !wait {
		if j := c.Journal(); j != nil {
			if err := j.Settle(sub.Key); err != nil && !cf.quiet {
				fmt.Fprintf(m.Stderr, "warning: %v\n", err)
			}
		}
		return nil
	}
	var bar *progressbar.ProgressBar
	if !cf.quiet {
		bar = progressbar.NewOptions64(int64(sub.Batch.Total),
			progressbar.OptionSetWriter(m.Stderr),
			progressbar.OptionSetDescription("batch"),
			progressbar.OptionSetSpinnerChangeInterval(0),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("jobs"),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetRenderBlankState(true),
		)
	}
	done, err := c.WaitBatch(ctx, sub.Batch.ID, func(b *api.Batch) {
		if bar != nil {
			_ = bar.Set64(int64(b.Progress.Done))
		}
	})
	if bar != nil {
		if err == nil {
			_ = bar.Finish()
		}
		_ = bar.Exit()
		fmt.Fprintln(m.Stderr)
	}
	if err != nil {
		return classify("submit", err)
	}
	for _, j := range done.Jobs {
		fmt.Fprintf(m.Stdout, "%s  %s\n", j.ID, j.State)
	}
	if !cf.quiet {
		fmt.Fprintf(m.Stderr, "%d succeeded, %d failed, %d canceled\n", done.Counts.Succeeded, done.Counts.Failed, done.Counts.Canceled)
	}
	switch {
	case done.Counts.Failed > 0:
		return classify("", &jobOutcomeError{&job.Resource{ID: done.ID, State: job.StateFailed}})
	case done.Counts.Canceled > 0:
		return classify("", &jobOutcomeError{&job.Resource{ID: done.ID, State: job.StateCanceled}})
	}
	return nil
}

// flowOptions reads submit's flow flags (docs/api.md, "Flow fields"); the
// server checks the values, this only their shape.
func flowOptions(runAt string, delay time.Duration, priority int, startBy string) ([]client.SubmitOption, error) {
	var opts []client.SubmitOption
	if runAt != "" && delay != 0 {
		return nil, &usageError{"submit: --run-at and --delay exclude each other"}
	}
	if runAt != "" {
		t, err := time.Parse(time.RFC3339, runAt)
		if err != nil {
			return nil, &usageError{"submit: --run-at must be an RFC 3339 time, e.g. 2026-12-05T09:00:00Z"}
		}
		opts = append(opts, client.WithRunAt(t))
	}
	if delay != 0 {
		opts = append(opts, client.WithDelay(delay))
	}
	if priority != 0 {
		opts = append(opts, client.WithPriority(priority))
	}
	if startBy != "" {
		t, err := time.Parse(time.RFC3339, startBy)
		if err != nil {
			return nil, &usageError{"submit: --start-by must be an RFC 3339 time, e.g. 2026-12-05T10:00:00Z"}
		}
		opts = append(opts, client.WithStartBy(t))
	}
	return opts, nil
}
