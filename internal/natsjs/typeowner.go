package natsjs

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrOwned: the type is declared by another credential.
var ErrOwned = errors.New("type declared by another credential")

// DeclareOwned stores a declaration on behalf of the credential d.Owner:
// created only if the name is free, replaced only if it is d.Owner's (or
// unowned, as declarations of earlier versions are), each by a
// compare-and-set, so two credentials racing for a new name never both
// win. An unchanged declaration is not written again; an operator's pause
// (Paused) stays as it is, whatever the declaration says.
func (s *TypeStore) DeclareOwned(ctx context.Context, d *job.TypeDecl) error {
	return s.declare(ctx, d, true)
}

// declare is Declare (owned false) and DeclareOwned, by compare-and-set so
// that a pause written meanwhile is never lost.
func (s *TypeStore) declare(ctx context.Context, d *job.TypeDecl, owned bool) error {
	if err := d.Validate(); err != nil {
		return err
	}
	want := *d
	for range 5 {
		cur, err := s.types.Get(ctx, d.Name)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			want.Paused = false
			data, err := json.Marshal(&want)
			if err != nil {
				return fmt.Errorf("encode type %s: %w", d.Name, err)
			}
			if _, err := s.types.Create(ctx, d.Name, data); err != nil {
				if errors.Is(err, jetstream.ErrKeyExists) {
					continue
				}
				return fmt.Errorf("declare type %s: %w", d.Name, mapErr(err))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("declare type %s: %w", d.Name, mapErr(err))
		}
		var have job.TypeDecl
		if json.Unmarshal(cur.Value(), &have) == nil {
			if owned && have.Owner != "" && have.Owner != d.Owner {
				return fmt.Errorf("type %s: %w", d.Name, ErrOwned)
			}
			want.Paused = have.Paused
			if sameDecl(&have, &want) {
				return nil
			}
		}
		data, err := json.Marshal(&want)
		if err != nil {
			return fmt.Errorf("encode type %s: %w", d.Name, err)
		}
		if _, err := s.types.Update(ctx, d.Name, data, cur.Revision()); err != nil {
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
			return fmt.Errorf("declare type %s: %w", d.Name, mapErr(err))
		}
		return nil
	}
	return fmt.Errorf("declare type %s: %w", d.Name, ErrStale)
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
