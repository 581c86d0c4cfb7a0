package job

import (
	"encoding/json"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
)

// TypeDecl is a job type as jobgate stores it: the declaration its worker
// sent (api.TypeDecl) with when and by whom. It is stored in
// JetStream (one entry per type name) by every worker process that runs the
// type, and every gateway accepts the type from the moment it reads it.
type TypeDecl struct {
	// Name is the type's name, [a-z][a-z0-9_]{0,63}.
	Name string `json:"name"`
	// Description says what the type produces, for people and forms.
	Description string `json:"description,omitempty"`
	// Schema is the JSON Schema (2020-12) of the params.
	Schema json.RawMessage `json:"schema"`
	// TimeoutSeconds is the time budget of one attempt.
	TimeoutSeconds int `json:"timeout_seconds"`
	// Attempts is how many attempts a job of this type gets.
	Attempts int `json:"attempts"`
	// MaxResultBytes bounds the size of one result.
	MaxResultBytes int64 `json:"max_result_bytes"`
	// ContentType is the media type of the results.
	ContentType string `json:"content_type"`
	// DeclaredAt is when this version of the declaration was written.
	DeclaredAt time.Time `json:"declared_at"`
	// Owner is the id of the worker credential that declared the type
	// first (internal/wire.CredentialID): only it may declare the type
	// again or run its jobs, until an operator deletes the type.
	Owner string `json:"owner,omitempty"`
	// Paused is set by an operator (POST /v1/admin/types/{name}/pause):
	// the type's jobs are admitted and wait queued, and no broker starts
	// one until it is resumed. A worker's declaration never changes it.
	Paused bool `json:"paused,omitempty"`
	// Endpoint, on an endpoint type (PUT /v1/admin/types/{name}), is the
	// HTTP handler jobgate's endpoint caller sends the attempts to; such a
	// type is owned by jobgate (wire.JobgateCredential), and no worker may
	// declare its name. Its signing secret is kept apart, with the
	// deployment's secrets (natsjs.Secrets).
	Endpoint *api.Endpoint `json:"endpoint,omitempty"`
	// Flow is the type's retry policy, concurrency keys and rate limit
	// (api.Flow): the broker applies it to every attempt it starts.
	api.Flow
}

// Public is the declaration as its worker wrote it.
func (d *TypeDecl) Public() api.TypeDecl {
	return api.TypeDecl{Name: d.Name, Description: d.Description, Schema: d.Schema,
		TimeoutSeconds: d.TimeoutSeconds, Attempts: d.Attempts, MaxResultBytes: d.MaxResultBytes,
		ContentType: d.ContentType, Flow: d.Flow}
}

// Timeout is the attempt time budget as a duration.
func (d *TypeDecl) Timeout() time.Duration { return time.Duration(d.TimeoutSeconds) * time.Second }

// Validate checks the declaration's own fields (api.TypeDecl.Validate).
func (d *TypeDecl) Validate() error {
	p := d.Public()
	if err := p.Validate(); err != nil {
		return err
	}
	if d.Endpoint != nil {
		return d.Endpoint.Validate()
	}
	return nil
}
