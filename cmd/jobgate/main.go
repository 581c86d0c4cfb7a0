// Command jobgate runs the jobgate services and its client commands. main is
// thin: everything happens in Main.Run so tests can drive it in-process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	if err := m.Run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h printed the flags; asking for help is not a failure
		}
		fmt.Fprintln(os.Stderr, "jobgate:", err)
		os.Exit(ExitCode(err))
	}
}

// Main is the program: its streams and environment are fields so tests can
// run any subcommand in-process.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// usageError marks a command-line mistake (exit code 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// ExitCode maps an error to the process exit code: 2 for usage mistakes, 1
// for everything else. Client commands refine this in their own files.
func ExitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	var ce interface{ ExitCode() int }
	if errors.As(err, &ce) {
		return ce.ExitCode()
	}
	return 1
}

const usage = `jobgate — admit expensive work exactly once, render it, tell the user.

Services:
  serve                 everything in one process on an embedded NATS server
  gateway|dispatcher|renderer|notifier
                        one component against an external NATS (--nats URL)
Tools:
  token                 print a bearer token (--tenant T --subject S [--ttl 1h] [--admin])
  nats-user             print NATS credentials for a tenant's event subscribers
  conformance           check a worker implementation, any language (--worker-cmd CMD)
  health                exit 0 when a /readyz answers 200 (--url; the probe of an image without a shell)
  backup|restore        copy a running deployment to a directory (--to DIR), or a copy into an empty one (--from DIR)
  types apply|rotate-secret
                        declare endpoint types from YAML (-f FILE), rotate one's secret (operator token)
  bench                 (bin/jobgate-bench only, make bench) measure the system (docs/performance.md)
Client:
  submit|status|watch|jobs|fetch

Run 'jobgate <command> -h' for a command's flags.`

// Run executes the subcommand named by args[0].
func (m *Main) Run(ctx context.Context, args []string) error {
	if m.Getenv == nil {
		m.Getenv = os.Getenv
	}
	if len(args) == 0 {
		fmt.Fprintln(m.Stderr, usage)
		return &usageError{"no command given"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return m.runServe(ctx, rest)
	case "gateway", "dispatcher", "renderer", "notifier":
		return m.runComponent(ctx, cmd, rest)
	case "token":
		return m.runToken(ctx, rest)
	case "help", "-h", "--help":
		fmt.Fprintln(m.Stdout, usage)
		return nil
	}
	if run, ok := m.extraCommands()[cmd]; ok {
		return run(ctx, rest)
	}
	fmt.Fprintln(m.Stderr, usage)
	return &usageError{fmt.Sprintf("unknown command %q", cmd)}
}
