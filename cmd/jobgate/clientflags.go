package main

// Client commands (submit, status, watch, jobs, fetch) talk to a gateway
// through pkg/client.
//
// Where the connection settings come from, first match wins:
//
//	server URL: --url, JOBGATE_URL, `url` in the client config file, http://127.0.0.1:8080
//	token:      --token, JOBGATE_TOKEN, `token` (or `token_file`) in the client config file
//	journal:    --journal, JOBGATE_JOURNAL, `journal` in the client config file,
//	            $XDG_STATE_HOME/jobgate/journal.db (~/.local/state/jobgate/journal.db)
//
// The client config file is --client-config, else JOBGATE_CLIENT_CONFIG, else
// $XDG_CONFIG_HOME/jobgate/client.yaml (~/.config/jobgate/client.yaml) when it
// exists. It is YAML:
//
//	url: http://127.0.0.1:8080
//	token_file: ~/.config/jobgate/token
//	journal: /var/lib/me/jobgate-journal.db
//
// Exit codes of the client commands:
//
//	0   success; for submit --wait and watch: the job succeeded
//	1   any other error (local I/O, a response the contract does not describe)
//	2   usage error (bad flags or arguments, no token configured)
//	3   the job failed (its error category and message are printed)
//	4   the job was canceled
//	5   not found: no such job, or not yours; or its result file expired
//	6   conflict: the idempotency key belongs to a different request, the
//	    result is not ready yet, or the job already finished (cancel)
//	7   the server refused the request as invalid (422 validation, 400, 413)
//	8   unauthorized: missing, malformed or expired token (401/403)
//	75  temporary: the server stayed unreachable, unavailable or
//	    rate-limited for the whole retry budget, or the journal stayed locked
//	    by another process. A submission is still journaled: run the same
//	    command again and it resumes with the same key and job.
//	130 interrupted (Ctrl-C); a submission is kept as for 75.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/client"
	"go.yaml.in/yaml/v3"
)

// Exit codes of the client commands (see the table above).
const (
	exitFailed       = 3
	exitCanceled     = 4
	exitNotFound     = 5
	exitConflict     = 6
	exitInvalid      = 7
	exitUnauthorized = 8
	exitTempFail     = 75
	exitInterrupted  = 130
)

const defaultServerURL = "http://127.0.0.1:8080"

// clientFlags are the connection flags every client command accepts.
type clientFlags struct {
	url, token, journal, configPath string
	verbose, quiet                  bool
	retryFor                        time.Duration
}

// clientUsage is appended to every client command's -h.
const clientUsage = `
Connection: --url, JOBGATE_URL, the client config file (--client-config,
JOBGATE_CLIENT_CONFIG, ~/.config/jobgate/client.yaml: url, token, token_file,
journal), default ` + defaultServerURL + `; the token likewise (JOBGATE_TOKEN).

Exit codes: 0 ok (job succeeded) · 1 other error · 2 usage · 3 job failed ·
4 job canceled · 5 not found · 6 conflict (key reused, result not ready,
already finished) · 7 invalid request · 8 unauthorized · 75 temporary (server
unreachable or unavailable, journal locked: run the same command again; a
submission resumes with the same key and job) · 130 interrupted.
`

// bindClientFlags registers the connection flags. retryFor is how long the
// command keeps retrying an unreachable or unavailable server by default.
func bindClientFlags(fs *flag.FlagSet, retryFor time.Duration) *clientFlags {
	cf := &clientFlags{}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of jobgate %s:\n", fs.Name())
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), clientUsage)
	}
	fs.StringVar(&cf.url, "url", "", "gateway URL (JOBGATE_URL; default "+defaultServerURL+")")
	fs.StringVar(&cf.token, "token", "", "bearer token (JOBGATE_TOKEN; mint one with `jobgate token`)")
	fs.StringVar(&cf.journal, "journal", "", "idempotency key journal file (JOBGATE_JOURNAL)")
	fs.StringVar(&cf.configPath, "client-config", "", "client config file (JOBGATE_CLIENT_CONFIG)")
	fs.DurationVar(&cf.retryFor, "retry-for", retryFor, "retry budget of each request: while the server is unreachable,\n"+
		"unavailable (5xx) or rate-limiting (429), retry with backoff until this long after the\n"+
		"request's first attempt; the last attempt starts at that deadline. A longer Retry-After\n"+
		"from the server ends the retrying at once. 0 = one attempt, no retries")
	fs.BoolVar(&cf.verbose, "v", false, "log every retry and reconnect")
	fs.BoolVar(&cf.quiet, "q", false, "print only results and errors")
	return cf
}

// clientFile is the YAML client config file.
type clientFile struct {
	URL       string `yaml:"url"`
	Token     string `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	Journal   string `yaml:"journal"`
}

func expandHome(p string, getenv func(string) string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home := getenv("HOME"); home != "" {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// loadClientFile reads the client config file; a missing default file is
// no error, a missing explicit one is.
func (cf *clientFlags) loadClientFile(getenv func(string) string) (*clientFile, error) {
	path, explicit := cf.configPath, true
	if path == "" {
		path = getenv("JOBGATE_CLIENT_CONFIG")
	}
	if path == "" {
		explicit = false
		dir := getenv("XDG_CONFIG_HOME")
		if dir == "" {
			if home := getenv("HOME"); home != "" {
				dir = filepath.Join(home, ".config")
			}
		}
		if dir == "" {
			return &clientFile{}, nil
		}
		path = filepath.Join(dir, "jobgate", "client.yaml")
	}
	raw, err := os.ReadFile(expandHome(path, getenv))
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return &clientFile{}, nil
	}
	if err != nil {
		return nil, &usageError{fmt.Sprintf("client config: %v", err)}
	}
	var f clientFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		return nil, &usageError{fmt.Sprintf("client config %s: %v", path, err)}
	}
	if f.Token == "" && f.TokenFile != "" {
		tok, err := os.ReadFile(expandHome(f.TokenFile, getenv))
		if err != nil {
			return nil, &usageError{fmt.Sprintf("client config %s: token_file: %v", path, err)}
		}
		f.Token = strings.TrimSpace(string(tok))
	}
	f.Journal = expandHome(f.Journal, getenv)
	return &f, nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// newClient builds the SDK client from flags, environment and config file.
func (m *Main) newClient(cf *clientFlags) (*client.Client, error) {
	file, err := cf.loadClientFile(m.Getenv)
	if err != nil {
		return nil, err
	}
	base := first(cf.url, m.Getenv("JOBGATE_URL"), file.URL, defaultServerURL)
	token := first(cf.token, m.Getenv("JOBGATE_TOKEN"), file.Token)
	if token == "" {
		return nil, &usageError{"no token: pass --token, set JOBGATE_TOKEN or put token in the client config file (mint one with `jobgate token --tenant T --subject S`)"}
	}
	journal := first(cf.journal, m.Getenv("JOBGATE_JOURNAL"), file.Journal)
	if journal == "" {
		if journal, err = client.JournalPath(m.Getenv); err != nil {
			return nil, err
		}
	}
	// Retries are silent unless asked for: the final error (or success)
	// says what matters, and a bar on stderr is not interleaved with logs.
	level := slog.LevelError
	if cf.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: level}))
	policy := client.RetryPolicy{MaxElapsed: cf.retryFor}
	if cf.retryFor <= 0 {
		policy.MaxAttempts = 1 // --retry-for 0: no retries
	}
	c, err := client.New(base, token, client.WithJournal(journal), client.WithLogger(log),
		client.WithUserAgent("jobgate-cli"), client.WithRetryPolicy(policy))
	if err != nil {
		return nil, &usageError{err.Error()}
	}
	return c, nil
}

// parseArgs parses flags that may come before, between or after the
// positional arguments ("status ID --json" and "status --json ID") and
// checks their number.
func parseArgs(fs *flag.FlagSet, args []string, min, max int, what string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err // main treats -h as success, as for every command
			}
			return nil, &usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < min || len(pos) > max {
		return nil, &usageError{fmt.Sprintf("%s: want %s", fs.Name(), what)}
	}
	return pos, nil
}

// clientError gives a client command's failure its exit code.
type clientError struct {
	code int
	err  error
}

func (e *clientError) Error() string { return e.err.Error() }
func (e *clientError) Unwrap() error { return e.err }

// ExitCode is the process exit code (see the table above).
func (e *clientError) ExitCode() int { return e.code }

// jobOutcomeError says a followed job ended other than succeeded.
type jobOutcomeError struct{ res *job.Resource }

func (e *jobOutcomeError) Error() string {
	if e.res.State == job.StateFailed && e.res.Error != nil {
		return fmt.Sprintf("job %s failed: %s: %s", e.res.ID, e.res.Error.Category, e.res.Error.Message)
	}
	return fmt.Sprintf("job %s %s", e.res.ID, e.res.State)
}

// classify prefixes err with what was being done and attaches the exit code.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) {
		return err
	}
	if what != "" {
		err = fmt.Errorf("%s: %w", what, err)
	}
	return &clientError{code: exitCodeOf(err), err: err}
}

func exitCodeOf(err error) int {
	var oe *jobOutcomeError
	if errors.As(err, &oe) {
		if oe.res.State == job.StateCanceled {
			return exitCanceled
		}
		return exitFailed
	}
	var pe *client.ProblemError
	if errors.As(err, &pe) && !(pe.Status >= 500 || pe.Status == 429 || pe.Status == 408) {
		switch pe.Status {
		case 401, 403:
			return exitUnauthorized
		case 404, 410:
			return exitNotFound
		case 409:
			return exitConflict
		case 400, 413, 415, 422:
			return exitInvalid
		}
		return 1
	}
	switch {
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.Is(err, client.ErrNotConfirmed), errors.Is(err, client.ErrJournalLocked), pe != nil:
		return exitTempFail
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) {
		return exitTempFail
	}
	return 1
}
