package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
)

// runToken prints a bearer token signed with the configured (or generated)
// secret, for development and tests.
func (m *Main) runToken(_ context.Context, args []string) error {
	fs := newFlagSet("token", m)
	sf := bindSettings(fs)
	tenant := fs.String("tenant", "", "tenant id (required, except with --operator)")
	subject := fs.String("subject", "", "requester id (required)")
	ttl := fs.Duration("ttl", time.Hour, "token lifetime")
	admin := fs.Bool("admin", false, "may read every job of the tenant (it cancels only its own), and use the admin API for the tenant")
	operator := fs.Bool("operator", false, "may use the admin API for every tenant (--tenant optional)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if (*tenant == "" && !*operator) || *subject == "" {
		return &usageError{"token: --tenant and --subject are required (--operator needs only --subject)"}
	}
	cfg, err := sf.load(fs, m.Getenv)
	if err != nil {
		return err
	}
	secret, err := auth.LoadSecret(cfg.AuthSecret, cfg.DataDir, false)
	if err != nil {
		return err
	}
	tok, err := auth.Mint(secret, auth.Identity{Tenant: *tenant, Requester: *subject, Admin: *admin, Operator: *operator}, *ttl, time.Now(),
		auth.WithAudience(cfg.AuthAudience), auth.WithIssuer(cfg.AuthIssuer))
	if err != nil {
		return &usageError{"token: " + err.Error()}
	}
	fmt.Fprintln(m.Stdout, tok)
	return nil
}
