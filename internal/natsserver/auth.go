package natsserver

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats-server/v2/server"
)

// TenantAuth authenticates the clients of an embedded server that listens
// for outside connections. In-process connections (nats.InProcessServer, the
// services of this process) keep full access without credentials: only code
// inside the process can open one, because the server accepts them over an
// in-memory pipe, never over its listener. Every network client must log in
// as a tenant subscriber, confined to that tenant's events, as a worker
// (WorkerPermissions), or as the operator's tools (OperatorUser).
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
	if opts.Username == OperatorUser {
		want := OperatorPassword(a.secret)
		if subtle.ConstantTimeCompare([]byte(opts.Password), []byte(want)) != 1 {
			a.refused(c, opts.Username)
			return false
		}
		c.RegisterUser(&server.User{Username: OperatorUser}) // full permissions, as in-process
		return true
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
