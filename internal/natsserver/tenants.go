package natsserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"path/filepath"

	"github.com/jobgate/jobgate/internal/natsjs"
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
		Subscribe: &server.SubjectPermission{Allow: []string{natsjs.TenantEvents(tenant)}},
	}
}
