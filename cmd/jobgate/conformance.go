package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/jobgate/jobgate/internal/conformance"
)

// runConformance drives a worker implementation, in any language, through
// the conformance scenarios (docs/conformance.md) against a deployment of
// its own: this binary's `serve` in a temp dir on free loopback ports.
func (m *Main) runConformance(ctx context.Context, args []string) error {
	fs := newFlagSet("conformance", m)
	cmd := fs.String("worker-cmd", "", "the command that starts one worker process (run as sh -c \"exec <cmd>\", with the environment docs/conformance.md lists)")
	dir := fs.String("dir", ".", "the directory the worker command runs in")
	name := fs.String("name", "w", "the prefix of the implementation's job types ([a-z][a-z0-9]{0,15})")
	only := fs.String("only", "", "comma-separated scenarios to run (all if empty): "+scenarioNames())
	if err := parse(fs, args); err != nil {
		return err
	}
	if strings.TrimSpace(*cmd) == "" {
		return &usageError{"conformance: --worker-cmd is required"}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("conformance: the jobgate binary: %w", err)
	}
	cfg := conformance.Config{Jobgate: self, WorkerCmd: *cmd, Dir: *dir, Name: *name, Out: m.Stdout}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	_, failed, err := conformance.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if failed > 0 {
		return &clientError{code: 1, err: fmt.Errorf("conformance: %d scenarios failed", failed)}
	}
	return nil
}

func scenarioNames() string {
	names := make([]string, len(conformance.Scenarios))
	for i, sc := range conformance.Scenarios {
		names[i] = sc.Name
	}
	return strings.Join(names, ", ")
}
