package natsjs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jobgate/jobgate/internal/job"
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

// HeaderTenant is the result object header naming the job's tenant, set
// when the object is put: a tenant's stored results are the objects that
// name it (TenantUse).
const HeaderTenant = "Jobgate-Tenant"

// TenantUse sums the sizes of the stored result objects per tenant (their
// HeaderTenant; an object without one, stored by an earlier version, counts
// for no tenant). It reads each object's metadata once (the object store's
// listing: an ordered consumer on the bucket's meta subjects, the last
// message of each, never the chunks), so it costs in proportion to the
// objects stored, some 300 bytes each, and holds one entry per tenant that
// has results; it ends with ctx, which should have a deadline.
func (f *ResultFiles) TenantUse(ctx context.Context) (map[string]int64, error) {
	w, err := f.os.Watch(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("tenants' result use: %w", unavailable(err))
	}
	defer stopWatch(w)
	use := map[string]int64{}
	for {
		select {
		case info, ok := <-w.Updates():
			switch {
			case !ok:
				return nil, fmt.Errorf("%w: tenants' result use: the listing ended early", job.ErrUnavailable)
			case info == nil: // the end of what is stored
				return use, nil
			case !info.Deleted && info.Headers != nil:
				if t := info.Headers.Get(HeaderTenant); t != "" {
					use[t] += int64(info.Size)
				}
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("tenants' result use: %w", unavailable(ctx.Err()))
		}
	}
}

// stopWatch ends an object store watch and takes what it still delivers
// until it closes its channel (its delivery goroutine blocks on a full
// channel otherwise, and stays), for at most 5 s.
func stopWatch(w jetstream.ObjectWatcher) {
	_ = w.Stop()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
		case <-timer.C:
			return
		}
	}
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
func putResult(ctx context.Context, chunks *streamRef, os jetstream.ObjectStore, obj ResultObject, body io.Reader) (int64, error) {
	name := obj.Name
	meta := jetstream.ObjectMeta{
		Name: name, Description: obj.Description,
		Headers: nats.Header{"Content-Type": []string{obj.ContentType}},
	}
	if obj.Tenant != "" {
		meta.Headers[HeaderTenant] = []string{obj.Tenant}
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	info, err := os.Put(pctx, meta, body)
	if err == nil {
		if verr := verifyResult(pctx, chunks, os, name); verr != nil {
			return 0, fmt.Errorf("store result %s: %w", name, verr)
		}
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

// verifyResult reads a stored result back, chunk by chunk, and checks it
// against the size and digest its put computed from what was sent. A put
// that lived through the loss of the stream's leader can be acknowledged
// while the chunks stored differ from those sent (chunk publishes answered
// "no responders" and sent again, landing after the object's meta: seen in
// TestResultUploadThroughResultsLeaderLoss, four chunks holding 291,712 of
// 408,000 bytes). Such a result is unavailable, so it is stored again from
// the worker's copy, or the attempt is retried; never handed to a reader.
// It costs one read of the result, by message gets (what a worker's
// credentials allow; a reader's ordered consumer is not).
func verifyResult(ctx context.Context, chunks *streamRef, os jetstream.ObjectStore, name string) error {
	info, err := os.GetInfo(ctx, name)
	if err != nil {
		return unavailable(err)
	}
	want, err := jetstream.DecodeObjectDigest(info.Digest)
	if err != nil {
		return fmt.Errorf("result %s: %w", name, err)
	}
	s, err := chunks.get(ctx)
	if err != nil {
		return unavailable(err)
	}
	subj := "$O." + info.Bucket + ".C." + info.NUID
	h := sha256.New()
	var size uint64
	var seq uint64 = 1
	for range info.Chunks {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break // fewer chunks than the meta says: the sizes differ
			}
			return unavailable(err)
		}
		h.Write(m.Data)
		size += uint64(len(m.Data))
		seq = m.Sequence + 1
	}
	if size != info.Size || !bytes.Equal(h.Sum(nil), want) {
		return fmt.Errorf("%w: result %s: the stored chunks (%d bytes) differ from what was sent (%d bytes)",
			job.ErrUnavailable, name, size, info.Size)
	}
	return nil
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
