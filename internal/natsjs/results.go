package natsjs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go"
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

// putResult streams body into os as the object name.
//
// The object store publishes the chunks asynchronously and then waits for
// every acknowledgement. It bounds that wait per chunk only when ctx has no
// deadline; with one, a chunk whose acknowledgement never comes (it was on
// its way to a stream leader that was killed or frozen, and the new leader
// never saw it) holds the put until the deadline, however far off. So the
// put gets ctx's cancellation without its deadline: a lost acknowledgement
// fails the put within the API timeout, as an outage (job.ErrUnavailable),
// and the caller can put the object again.
//
// A failed put also refreshes what the handle knows of the bucket's stream:
// it reads object metadata by direct get while the configuration it last
// read allows that, and a handle opened before its provisioner turned
// direct gets off would otherwise meet "no responders" from then on.
func putResult(ctx context.Context, os jetstream.ObjectStore, name, contentType, description string, body io.Reader) (int64, error) {
	meta := jetstream.ObjectMeta{
		Name: name, Description: description,
		Headers: nats.Header{"Content-Type": []string{contentType}},
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	info, err := os.Put(pctx, meta, body)
	if err == nil {
		return int64(info.Size), nil
	}
	if cerr := ctx.Err(); cerr != nil {
		// The put saw its context canceled; say why it was.
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if errors.Is(err, jetstream.ErrAsyncPublishTimeout) || errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		err = fmt.Errorf("%w: %w", job.ErrUnavailable, err)
	}
	if ctx.Err() == nil && Unavailable(err) {
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = os.Status(sctx) // refreshes the handle's stream configuration
		scancel()
	}
	return 0, fmt.Errorf("store result %s: %w", name, mapErr(err))
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
