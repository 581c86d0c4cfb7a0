package natsserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// OperatorUser is the NATS user of an operator's tools (jobgate backup and
// restore) on an embedded server's listener: full access, like the
// in-process connections of jobgate's own components. Its password derives
// from the data dir's subscriber secret, so only who can read the data dir
// (and so every job and result in it already) can log in as it.
const OperatorUser = "jobgate-operator"

// OperatorPassword derives the operator user's password.
func OperatorPassword(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("jobgate operator v1\x00"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
