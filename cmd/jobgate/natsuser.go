package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/system"
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
		return m.printClusterWorkerUser(types)
	}
	if !cfg.Embedded() {
		return &usageError{fmt.Sprintf("nats-user: credentials are for jobgate's embedded server; with an external NATS, "+
			"grant the tenant's users subscribe on %q (and nothing else) in that server's own configuration", natsjs.TenantEvents(*tenant))}
	}
	secret, err := natsserver.SubscriberSecret(cfg.DataDir)
	if err != nil {
		return err
	}
	url := ""
	if cfg.NATS.Listen != "" {
		url = "nats://" + cfg.NATS.Listen
	} else {
		// serve's --nats-listen is a flag of its own process: it leaves
		// the URL it listens on in the data dir.
		url = system.ServingNATSURL(cfg.DataDir)
	}
	if *worker {
		user, err := natsserver.WorkerUser(types)
		if err != nil {
			return &usageError{"nats-user: " + err.Error()}
		}
		pass := natsserver.WorkerPassword(secret, user)
		if *asEnv {
			fmt.Fprintf(m.Stdout, "JOBGATE_WORKER_USER=%s\nJOBGATE_WORKER_PASSWORD=%s\n", user, pass)
			return nil
		}
		return m.printWorkerUser(user, pass, url, *asJSON)
	}
	user, pass, subject := natsserver.TenantUser(*tenant), natsserver.TenantPassword(secret, *tenant), natsjs.TenantEvents(*tenant)
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

// printClusterWorkerUser prints, for an operator-run NATS, the user block
// that gives a worker credential exactly its types' protocol subjects, with
// a fresh random password: the operator adds it to every node's
// configuration (docs/protocol.md).
func (m *Main) printClusterWorkerUser(types []string) error {
	user, err := natsserver.WorkerUser(types)
	if err != nil {
		return &usageError{"nats-user: " + err.Error()}
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	pass := base64.RawURLEncoding.EncodeToString(raw[:])
	perms := natsserver.WorkerPermissions(user, types)
	quote := func(list []string) string {
		q := make([]string, len(list))
		for i, s := range list {
			q[i] = strconv.Quote(s)
		}
		return strings.Join(q, ", ")
	}
	fmt.Fprintf(m.Stdout, "# Add this user to the authorization block of every NATS node's configuration and reload it\n"+
		"# (nats-server --signal reload). jobgate's own components need a user that may use jobgate's\n"+
		"# streams and subjects; this one may only send the worker protocol's requests of its types.\n"+
		"authorization {\n  users: [\n    {\n      user: %q\n      password: %q\n      permissions: {\n"+
		"        publish: { allow: [%s] }\n        subscribe: { allow: [%s] }\n      }\n    }\n  ]\n}\n\n"+
		"# The worker connects with:\nJOBGATE_WORKER_USER=%s\nJOBGATE_WORKER_PASSWORD=%s\n# credential id: %s\n",
		user, pass, quote(perms.Publish.Allow), quote(perms.Subscribe.Allow), user, pass, wire.CredentialID(user))
	return nil
}
