package natsserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/nats-io/nats-server/v2/server"
)

// Worker processes outside the server's process log in with a credential
// for their own job types only (`jobgate nats-user --worker --type T`):
// the user name lists the types, the password is derived from the data
// dir's secret and the name, so the server needs no restart to accept a
// new credential.

// workerUserPrefix starts the user name of a minted worker credential.
const workerUserPrefix = "jgw."

// MaxWorkerTypes bounds the types of one worker credential.
const MaxWorkerTypes = 32

// WorkerUser is the user name of the worker credential for types (in any
// order, repeats ignored): "jgw." + the sorted types joined by ".".
func WorkerUser(types []string) (string, error) {
	t := slices.Clone(types)
	slices.Sort(t)
	t = slices.Compact(t)
	if len(t) == 0 || len(t) > MaxWorkerTypes {
		return "", fmt.Errorf("a worker credential is for 1 to %d types, got %d", MaxWorkerTypes, len(t))
	}
	for _, name := range t {
		if !job.ValidTypeName(name) {
			return "", fmt.Errorf("type %q must match [a-z][a-z0-9_]{0,63}", name)
		}
		if wire.Builtin(name) {
			return "", fmt.Errorf("%s is a built-in type: only jobgate's own workers run it", name)
		}
	}
	return workerUserPrefix + strings.Join(t, "."), nil
}

// WorkerTypes reads the types out of a minted worker user name: false for
// a name WorkerUser would not have written.
func WorkerTypes(user string) ([]string, bool) {
	rest, ok := strings.CutPrefix(user, workerUserPrefix)
	if !ok {
		return nil, false
	}
	types := strings.Split(rest, ".")
	again, err := WorkerUser(types)
	if err != nil || again != user {
		return nil, false
	}
	return types, true
}

// WorkerPassword derives the password of a worker user.
func WorkerPassword(secret []byte, user string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("jobgate nats-user worker v2\x00" + user))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// WorkerPermissions are exactly what a worker of types needs: publish the
// protocol's requests under its credential and those types, and receive
// their replies in its own inbox. No JetStream API, no events, no other
// client's replies, no other type's work (docs/protocol.md).
func WorkerPermissions(user string, types []string) *server.Permissions {
	cred := wire.CredentialID(user)
	allow := make([]string, 0, len(types))
	for _, t := range types {
		allow = append(allow, wire.Prefix(cred, t)+">")
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: allow},
		Subscribe: &server.SubjectPermission{Allow: []string{wire.InboxPrefix(cred) + ".>"}},
	}
}
