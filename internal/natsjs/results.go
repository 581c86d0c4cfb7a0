package natsjs

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go/jetstream"
)

// ResultFiles is the JOBGATE_RESULTS object store: the rendered result
// files, by object name. Its errors wrap job.ErrResultExpired (the object is
// gone) and job.ErrUnavailable.
type ResultFiles struct {
	os jetstream.ObjectStore
}

// NewResultFiles returns the result files in os (Provision returns one).
func NewResultFiles(os jetstream.ObjectStore) *ResultFiles { return &ResultFiles{os: os} }

// ResultFile is one result being read. Close it.
type ResultFile struct {
	io.ReadCloser
	Size               int64
	ContentType        string // "" when the object carries none
	ContentDisposition string // "" when the object carries none
}

// Open starts reading the result object name.
func (f *ResultFiles) Open(ctx context.Context, name string) (*ResultFile, error) {
	obj, err := f.os.Get(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("result %s: %w", name, job.ErrResultExpired)
		}
		return nil, fmt.Errorf("result %s: %w", name, unavailable(err))
	}
	info, err := obj.Info()
	if err != nil {
		_ = obj.Close()
		return nil, fmt.Errorf("result %s: %w", name, unavailable(err))
	}
	rf := &ResultFile{ReadCloser: obj, Size: int64(info.Size)}
	if info.Headers != nil {
		rf.ContentType = info.Headers.Get("Content-Type")
		rf.ContentDisposition = info.Headers.Get("Content-Disposition")
	}
	return rf, nil
}

// unavailable maps err, and says a failure the mapping does not know is one
// of the store's too: the caller can only retry.
func unavailable(err error) error {
	m := mapErr(err)
	if errors.Is(m, job.ErrUnavailable) {
		return m
	}
	return fmt.Errorf("%w: %w", job.ErrUnavailable, err)
}

// Secrets are the deployment-wide secrets in the JOBGATE_META bucket.
type Secrets struct {
	kv jetstream.KeyValue
}

// NewSecrets returns the secrets in kv (Provision returns them).
func NewSecrets(kv jetstream.KeyValue) *Secrets { return &Secrets{kv: kv} }

// Get returns the secret name (SecretJobID, SecretLinks), creating it on
// first use.
func (s *Secrets) Get(ctx context.Context, name string) ([]byte, error) {
	return secret(ctx, s.kv, name)
}
