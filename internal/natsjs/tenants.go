package natsjs

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/secretfile"
	"github.com/nats-io/nats-server/v2/server"
)

// Tenant subscribers are NATS clients outside the process (a tenant's own
// service) that follow the events of one tenant on the embedded server. Their
// credentials are derived, not stored: the password of tenant T is an HMAC of
// T under a secret kept in the data dir, so `jobgate nats-user --tenant T`
// can print them without the server running and the server can check any
// tenant without a user list or a restart.

// tenantUserPrefix starts the NATS user name of a tenant's subscribers.
const tenantUserPrefix = "tenant-"

// SubscriberSecretFile is where the secret of tenant subscriber credentials
// lives under the data dir.
func SubscriberSecretFile(dataDir string) string {
	return filepath.Join(dataDir, "nats-users.secret")
}

// SubscriberSecret reads the secret of tenant subscriber credentials from the
// data dir, creating it on first use. Concurrent first uses agree on one value.
func SubscriberSecret(dataDir string) ([]byte, error) {
	s, err := secretfile.ReadOrCreate(SubscriberSecretFile(dataDir))
	if err != nil {
		return nil, fmt.Errorf("subscriber secret: %w", err)
	}
	return s, nil
}

// TenantUser is the NATS user name of tenant's event subscribers.
func TenantUser(tenant string) string { return tenantUserPrefix + tenant }

// TenantPassword derives the NATS password of tenant's event subscribers.
func TenantPassword(secret []byte, tenant string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("jobgate nats-user v1\x00"))
	m.Write([]byte(tenant))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TenantPermissions are what tenant's subscribers may do: subscribe to the
// tenant's events (core NATS, live), nothing else. No publish at all, hence
// no request/reply and no JetStream API: a consumer API would need replies on
// shared inboxes and stream-wide requests, which would leak other tenants'
// traffic; a subscriber that missed events reads the job over HTTP.
func TenantPermissions(tenant string) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Deny: []string{">"}},
		Subscribe: &server.SubjectPermission{Allow: []string{TenantEvents(tenant)}},
	}
}

// TenantAuth authenticates the clients of an embedded server that listens
// for outside connections. In-process connections (nats.InProcessServer, the
// services of this process) keep full access without credentials: only code
// inside the process can open one, because the server accepts them over an
// in-memory pipe, never over its listener. Every network client must log in
// as a tenant subscriber, confined to that tenant's events, or as a worker
// (WorkerPermissions).
type TenantAuth struct {
	secret []byte
	// Log, if set, receives a warning for refused logins, at most one per
	// refusedEvery (with the count of those left out).
	Log *slog.Logger

	mu         sync.Mutex
	lastWarn   time.Time
	suppressed int
}

// refusedEvery spaces the warnings of refused logins: a client retrying a
// wrong password every 250 ms must not flood the log.
const refusedEvery = 10 * time.Second

// refused logs a refused login, rate limited. The password is never
// logged; the user name is (it names a tenant or a worker's types).
func (a *TenantAuth) refused(c server.ClientAuthentication, user string) {
	if a.Log == nil {
		return
	}
	a.mu.Lock()
	now := time.Now()
	if now.Sub(a.lastWarn) < refusedEvery {
		a.suppressed++
		a.mu.Unlock()
		return
	}
	n := a.suppressed
	a.lastWarn, a.suppressed = now, 0
	a.mu.Unlock()
	remote := ""
	if addr := c.RemoteAddress(); addr != nil {
		remote = addr.String()
	}
	a.Log.Warn("NATS login refused: wrong password", "user", clipUser(user), "remote", remote, "refused_since_last_warning", n)
}

func clipUser(u string) string {
	if len(u) > 200 {
		return u[:200] + "…"
	}
	return u
}

// NewTenantAuth returns the authenticator for credentials derived from secret.
func NewTenantAuth(secret []byte) (*TenantAuth, error) {
	if len(secret) < 16 {
		return nil, errors.New("tenant auth: secret too short")
	}
	return &TenantAuth{secret: secret}, nil
}

// Configure installs the authenticator on the server options; use it as (or
// from) EmbeddedConfig.Configure.
func (a *TenantAuth) Configure(o *server.Options) error {
	if o.CustomClientAuthentication != nil {
		return errors.New("tenant auth: another client authenticator is already configured")
	}
	o.CustomClientAuthentication = a
	return nil
}

// Check implements server.Authentication.
func (a *TenantAuth) Check(c server.ClientAuthentication) bool {
	if c.Kind() != server.CLIENT {
		return false
	}
	if addr := c.RemoteAddress(); addr != nil && addr.Network() == "pipe" {
		// In-process connection: full permissions, global account.
		c.RegisterUser(&server.User{Username: "jobgate-internal"})
		return true
	}
	opts := c.GetOpts()
	if opts == nil {
		return false
	}
	if types, ok := WorkerTypes(opts.Username); ok {
		want := WorkerPassword(a.secret, opts.Username)
		if subtle.ConstantTimeCompare([]byte(opts.Password), []byte(want)) != 1 {
			a.refused(c, opts.Username)
			return false
		}
		c.RegisterUser(&server.User{Username: opts.Username, Permissions: WorkerPermissions(opts.Username, types)})
		return true
	}
	tenant, ok := strings.CutPrefix(opts.Username, tenantUserPrefix)
	if !ok || !job.ValidScopeID(tenant) {
		return false
	}
	want := TenantPassword(a.secret, tenant)
	if subtle.ConstantTimeCompare([]byte(opts.Password), []byte(want)) != 1 {
		a.refused(c, opts.Username)
		return false
	}
	c.RegisterUser(&server.User{Username: opts.Username, Permissions: TenantPermissions(tenant)})
	return true
}
