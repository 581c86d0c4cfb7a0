package main

import "context"

// extraCommands lists the subcommands beyond the services and token, each
// implemented in its own file (nats-user, submit, status, watch, jobs, fetch,
// bench). Add one line per command here.
func (m *Main) extraCommands() map[string]func(context.Context, []string) error {
	return map[string]func(context.Context, []string) error{
		"nats-user": m.runNATSUser,
	}
}
