// Package endpointcb is what the gateway and the endpoint caller share of
// an asynchronous endpoint attempt's callbacks (docs/endpoints.md, "202"):
// the callback token, minted by the caller and checked by the gateway, and
// the NATS request the gateway relays each callback as. The gateway and
// the dispatcher never import each other; both import this.
//
// The token names the attempt (job key and attempt number) and the caller
// process that holds it, under an HMAC of a deployment secret
// (natsjs.SecretCallbacks): a token jobgate did not mint names no attempt,
// and a token names one attempt only. It is not the attempt's claim: its
// holder can report on that attempt through the gateway and nothing else.
package endpointcb

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// ErrGone: no process holds the attempts of a callback's route any more
// (it stopped or died), so neither does it hold the attempt's claim.
var ErrGone = errors.New("no endpoint caller holds the attempt")

// Operations of a callback, the last segment of its URL.
const (
	OpBeat   = "beat"
	OpResult = "result"
	OpDone   = "done"
	OpFail   = "fail"
)

// NATS headers of a relayed callback.
const (
	HeaderToken = "Jobgate-Callback-Token"
	HeaderOp    = "Jobgate-Callback-Op"
	// HeaderLast marks the last chunk of a result upload (the whole body
	// read); the chunks before it carry none.
	HeaderLast = "Jobgate-Callback-Last"
)

// ChunkBytes is the size of a relayed result chunk (under NATS's default
// 1 MiB payload).
const ChunkBytes = 256 << 10

// Subject is where the caller process route takes its attempts' callbacks.
func Subject(route string) string { return "jobgate.endpointcb." + route }

// Attempt is what a token names.
type Attempt struct {
	Route     string `json:"r"` // the caller process holding it
	Tenant    string `json:"t"`
	Requester string `json:"q"`
	Job       string `json:"j"`
	Attempt   int    `json:"a"`
}

// Mint returns a's token under secret.
func Mint(secret []byte, a Attempt) string {
	data, _ := json.Marshal(a) // strings and an int: never fails
	body := base64.RawURLEncoding.EncodeToString(data)
	return body + "." + base64.RawURLEncoding.EncodeToString(mac(secret, body))
}

// Parse returns the attempt a token names; false when jobgate did not mint
// it (under secret).
func Parse(secret []byte, token string) (Attempt, bool) {
	body, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > 2048 {
		return Attempt{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(secret, body)) {
		return Attempt{}, false
	}
	data, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return Attempt{}, false
	}
	var a Attempt
	if json.Unmarshal(data, &a) != nil || a.Route == "" || a.Job == "" || a.Attempt < 1 {
		return Attempt{}, false
	}
	return a, true
}

func mac(secret []byte, body string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("jobgate endpoint callback v1\x00"))
	h.Write([]byte(body))
	return h.Sum(nil)
}

// Reply is the caller's answer to a relayed callback: the HTTP status the
// gateway answers with, and for a refusal the detail of its problem.
type Reply struct {
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Beat is the body of a beat callback.
type Beat struct {
	Progress *struct {
		Done  int    `json:"done"`
		Total int    `json:"total"`
		Unit  string `json:"unit"`
	} `json:"progress,omitempty"`
}

// Fail is the body of a fail callback.
type Fail struct {
	Message     string `json:"message"`
	UserMessage string `json:"user_message,omitempty"`
	Retryable   *bool  `json:"retryable,omitempty"`
}
