package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/job"
)

// runNATSUser prints the NATS credentials of a tenant's event subscribers,
// or of worker processes, for the embedded server (`serve --nats-listen`). They are derived from a
// secret in the data dir, so the same tenant always gets the same password
// and the server needs no restart to accept a new tenant.
func (m *Main) runNATSUser(_ context.Context, args []string) error {
	fs := newFlagSet("nats-user", m)
	sf := bindSettings(fs)
	tenant := fs.String("tenant", "", "tenant id: credentials to subscribe to this tenant's job events")
	worker := fs.Bool("worker", false, "credentials for worker processes (pkg/worker) instead of a tenant's subscribers")
	var types typeList
	fs.Var(&types, "type", "with --worker: a job type the credential may run (repeat for more)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	asEnv := fs.Bool("env", false, "with --worker: print JOBGATE_WORKER_USER=... and JOBGATE_WORKER_PASSWORD=... lines for `export $(...)`")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *worker == (*tenant != "") {
		return &usageError{"nats-user: give either --tenant T (event subscribers) or --worker (worker processes)"}
	}
	if *worker && len(types) == 0 {
		return &usageError{"nats-user: --worker needs the types the credential may run: --type T [--type U ...]"}
	}
	if !*worker && !job.ValidScopeID(*tenant) {
		return &usageError{"nats-user: --tenant must be a tenant id ([A-Za-z0-9_-]{1,64})"}
	}
	cfg, err := sf.load(fs, m.Getenv)
	if err != nil {
		return err
	}
	if !cfg.Embedded() && *worker {
		return &usageError{"nats-user: credentials are for jobgate's embedded server; with an external NATS, give worker " +
			"processes a user with the permissions listed in docs/workers.md in that server's own configuration"}
	}
	if !cfg.Embedded() {
		return &usageError{fmt.Sprintf("nats-user: credentials are for jobgate's embedded server; with an external NATS, "+
			"grant the tenant's users subscribe on %q (and nothing else) in that server's own configuration", natsjs.TenantEvents(*tenant))}
	}
	secret, err := natsjs.SubscriberSecret(cfg.DataDir)
	if err != nil {
		return err
	}
	url := ""
	if cfg.NATS.Listen != "" {
		url = "nats://" + cfg.NATS.Listen
	}
	if *worker {
		user, err := natsjs.WorkerUser(types)
		if err != nil {
			return &usageError{"nats-user: " + err.Error()}
		}
		pass := natsjs.WorkerPassword(secret, user)
		if *asEnv {
			fmt.Fprintf(m.Stdout, "JOBGATE_WORKER_USER=%s\nJOBGATE_WORKER_PASSWORD=%s\n", user, pass)
			return nil
		}
		return m.printWorkerUser(user, pass, url, *asJSON)
	}
	user, pass, subject := natsjs.TenantUser(*tenant), natsjs.TenantPassword(secret, *tenant), natsjs.TenantEvents(*tenant)
	if *asJSON {
		return json.NewEncoder(m.Stdout).Encode(map[string]string{"user": user, "password": pass, "subject": subject, "url": url})
	}
	fmt.Fprintf(m.Stdout, "user:     %s\npassword: %s\nsubject:  %s\n", user, pass, subject)
	if url == "" {
		fmt.Fprintln(m.Stdout, "url:      (start `jobgate serve` with --nats-listen or JOBGATE_NATS_LISTEN, e.g. 127.0.0.1:4222)")
		url = "nats://127.0.0.1:4222"
	} else {
		fmt.Fprintf(m.Stdout, "url:      %s\n", url)
	}
	fmt.Fprintf(m.Stdout, "try:      nats sub --server %s --user %s --password %s '%s'\n", url, user, pass, subject)
	fmt.Fprintln(m.Stdout, "These credentials may subscribe to the tenant's job events and nothing else (no publish, no JetStream API).")
	return nil
}

// printWorkerUser prints the credentials of worker processes.
func (m *Main) printWorkerUser(user, pass, url string, asJSON bool) error {
	cred := wire.CredentialID(user)
	if asJSON {
		return json.NewEncoder(m.Stdout).Encode(map[string]string{"user": user, "password": pass, "url": url, "credential": cred})
	}
	fmt.Fprintf(m.Stdout, "user:       %s\npassword:   %s\ncredential: %s\n", user, pass, cred)
	if url == "" {
		fmt.Fprintln(m.Stdout, "url:        (start `jobgate serve` with --nats-listen or JOBGATE_NATS_LISTEN, e.g. 127.0.0.1:4222)")
	} else {
		fmt.Fprintf(m.Stdout, "url:        %s\n", url)
	}
	fmt.Fprintln(m.Stdout, "These credentials let a worker process (pkg/worker) run these job types and nothing else: declare them, "+
		"take their jobs and report on the jobs it holds, through jobgate's checks (docs/protocol.md). They reach no stream, "+
		"bucket, event or other type.")
	return nil
}

// typeList collects repeated --type flags.
type typeList []string

func (l *typeList) String() string { return strings.Join(*l, ",") }

func (l *typeList) Set(s string) error {
	*l = append(*l, s)
	return nil
}
