package natsjs

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go/jetstream"
)

// ResultObject is a result object being put: its name (<jobID>.a<attempt>)
// and what it records alongside the bytes.
type ResultObject struct {
	Name        string
	Tenant      string // the job's tenant, whose result quota the object counts against (HeaderTenant)
	ContentType string
	Description string
}

// PutResult streams a result object into the results store and returns its
// size (see putResult). A read error from body aborts the put and leaves
// nothing.
func (r *Resources) PutResult(ctx context.Context, obj ResultObject, body io.Reader) (int64, error) {
	return putResult(ctx, r.resultChunks, r.Results, obj, body)
}

// TenantUse is each tenant's stored result bytes (ResultFiles.TenantUse).
func (r *Resources) TenantUse(ctx context.Context) (map[string]int64, error) {
	if r.Files == nil {
		return nil, errors.New("tenants' result use: no result files bound")
	}
	return r.Files.TenantUse(ctx)
}

// DeleteResult removes a result object; one that is gone is not an error.
func (r *Resources) DeleteResult(ctx context.Context, name string) error {
	if err := r.Results.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("delete result %s: %w", name, mapErr(err))
	}
	return nil
}

// ResultInfo returns the size and SHA-256 (hex) of a stored result object,
// as the object store computed them while it stored the bytes.
func (r *Resources) ResultInfo(ctx context.Context, name string) (int64, string, error) {
	info, err := r.Results.GetInfo(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return 0, "", fmt.Errorf("result %s: %w", name, job.ErrNotFound)
		}
		return 0, "", fmt.Errorf("result %s: %w", name, mapErr(err))
	}
	sum, err := digestHex(info.Digest)
	if err != nil {
		return 0, "", fmt.Errorf("result %s: %w", name, err)
	}
	return int64(info.Size), sum, nil
}

// digestHex turns the object store's "SHA-256=<base64url>" into hex.
func digestHex(d string) (string, error) {
	b64, ok := strings.CutPrefix(d, "SHA-256=")
	if !ok {
		return "", fmt.Errorf("digest %q is not SHA-256", d)
	}
	raw, err := base64.URLEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("digest %q: %w", d, err)
	}
	return hex.EncodeToString(raw), nil
}
