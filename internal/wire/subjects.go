package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Version is the protocol's version, in every subject.
const Version = "w1"

// Root is the prefix of every request a worker sends:
// Root + "<credential>.<type>.<op>".
const Root = "jobgate." + Version + "."

// Operations, the last token of a request's subject.
const (
	OpDeclare  = "declare"  // declare (or confirm) the type
	OpHello    = "hello"    // the process is alive (presence)
	OpBye      = "bye"      // the process stops serving the type
	OpNext     = "next"     // take the next job of the type (long poll)
	OpBeat     = "beat"     // heartbeat and progress of a held job
	OpOpen     = "open"     // open the result upload of a held job
	OpDone     = "done"     // the held job succeeded
	OpFail     = "fail"     // the held job's attempt failed
	OpGiveBack = "giveback" // the held job goes back, no verdict
	OpUpload   = "up"       // + ".<host>.<upload>": one chunk of an open upload
)

// JobgateCredential is the credential id of jobgate's own workers (the
// built-in types). No minted credential can have it: minted ids are hex.
const JobgateCredential = "jobgate"

// Subject is the subject of op for a credential and a type.
func Subject(cred, typ, op string) string { return Root + cred + "." + typ + "." + op }

// UploadSubject is where the chunks of an open upload go.
func UploadSubject(cred, typ, host, upload string) string {
	return Root + cred + "." + typ + "." + OpUpload + "." + host + "." + upload
}

// Prefix is what a credential may publish to for one type (its NATS
// permission): Prefix(cred, typ) + ">".
func Prefix(cred, typ string) string { return Root + cred + "." + typ + "." }

// InboxPrefix is the reply-subject prefix of a credential's connections;
// its permissions let it subscribe there and nowhere else.
func InboxPrefix(cred string) string { return "_JG_W." + cred }

// Parse splits a request subject into credential, type and operation (the
// operation's remaining tokens, for uploads, in rest).
func Parse(subject string) (cred, typ, op string, rest []string, ok bool) {
	s, found := strings.CutPrefix(subject, Root)
	if !found {
		return "", "", "", nil, false
	}
	parts := strings.Split(s, ".")
	if len(parts) < 3 || !ValidCredential(parts[0]) || !ValidTypeName(parts[1]) {
		return "", "", "", nil, false
	}
	return parts[0], parts[1], parts[2], parts[3:], true
}

var (
	typeName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	credID   = regexp.MustCompile(`^(jobgate|[0-9a-f]{16})$`)
	token    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// ValidTypeName reports whether s is a job type's name.
func ValidTypeName(s string) bool { return typeName.MatchString(s) }

// ValidCredential reports whether s is a credential id.
func ValidCredential(s string) bool { return credID.MatchString(s) }

// ValidToken reports whether s may be a subject token chosen by a worker
// or the broker (an upload id, a host id, a worker's name).
func ValidToken(s string) bool { return token.MatchString(s) }

// CredentialID is the id of the credential whose NATS user name is user:
// what its subjects carry. Minted users are "jgw." + the types joined by
// "."; an operator-run NATS may use any user name, and the id is derived
// the same way on both sides.
func CredentialID(user string) string {
	h := sha256.Sum256([]byte("jobgate worker credential v1\x00" + user))
	return hex.EncodeToString(h[:8])
}

var workerName = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,128}$`)

// ValidWorkerName reports whether s may name a worker process.
func ValidWorkerName(s string) bool { return workerName.MatchString(s) }
