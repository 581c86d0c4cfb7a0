package main

import (
	"context"
	"flag"
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
	handler := fs.String("endpoint-cmd", "", "instead of a worker: the command that starts an endpoint type's handler process listening on the port it is given (docs/conformance.md, \"Endpoint types\")")
	dir := fs.String("dir", ".", "the directory the worker command runs in")
	name := fs.String("name", "w", "the prefix of the implementation's job types ([a-z][a-z0-9]{0,15})")
	only := fs.String("only", "", "comma-separated scenarios to run (all if empty): "+scenarioNames()+"; with --endpoint-cmd: "+conformance.EndpointScenarioNames())
	if err := parse(fs, args); err != nil {
		return err
	}
	if (strings.TrimSpace(*cmd) == "") == (strings.TrimSpace(*handler) == "") {
		return &usageError{"conformance: one of --worker-cmd and --endpoint-cmd is required"}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("conformance: the jobgate binary: %w", err)
	}
	var scenarios []string
	if *only != "" {
		scenarios = strings.Split(*only, ",")
	}
	var failed int
	if *handler != "" {
		if !isFlagSet(fs, "name") {
			*name = "h"
		}
		_, failed, err = conformance.RunEndpoints(ctx, conformance.EndpointConfig{Jobgate: self, HandlerCmd: *handler, Dir: *dir, Name: *name, Only: scenarios, Out: m.Stdout})
	} else {
		_, failed, err = conformance.Run(ctx, conformance.Config{Jobgate: self, WorkerCmd: *cmd, Dir: *dir, Name: *name, Only: scenarios, Out: m.Stdout})
	}
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

// isFlagSet says whether name was given on the command line.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
