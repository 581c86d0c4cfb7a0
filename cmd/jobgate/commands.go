package main

import "context"

// extraCommands lists the subcommands beyond the services and token, each
// implemented in its own file (nats-user, submit, status, watch, jobs, fetch,
// bench). Add one line per command here.
func (m *Main) extraCommands() map[string]func(context.Context, []string) error {
	cmds := map[string]func(context.Context, []string) error{
		"nats-user": m.runNATSUser,
		"submit":    m.runSubmit,
		"status":    m.runStatus,
		"watch":     m.runWatch,
		"jobs":      m.runJobs,
		"fetch":     m.runFetch,
		// The operator's endpoint types (docs/endpoints.md).
		"types": m.runTypes,
		// The worker protocol's conformance runner, for any language.
		"conformance": m.runConformance,
		"backup":      m.runBackup,
		"restore":     m.runRestore,
		// The probe of an image without a shell (deploy/compose).
		"health": m.runHealth,
	}
	// The load generator is built only into the bench binary (make bench,
	// -tags bench): it is not part of what production runs.
	if benchCommand != nil {
		cmds["bench"] = func(ctx context.Context, args []string) error { return benchCommand(m, ctx, args) }
	}
	return cmds
}
