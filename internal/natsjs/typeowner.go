package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
	_, _, err := s.put(ctx, d, func(have *job.TypeDecl) error {
		// An operator's endpoint type is no worker's to declare, jobgate's
		// own workers' included (DeclareEndpoint replaces it).
		if owned && (have.Owner != "" && have.Owner != d.Owner || have.Endpoint != nil) {
			return fmt.Errorf("type %s: %w", d.Name, ErrOwned)
		}
		return nil
	})
	return err
}

// put stores d by compare-and-set: created if the name is free, else
// replaced once check accepts the declaration stored (an error of check's
// is returned as it is; an undecodable one is replaced unchecked), keeping
// its pause. An unchanged declaration is not written again. It returns
// whether it created the type and the declaration as stored.
func (s *TypeStore) put(ctx context.Context, d *job.TypeDecl, check func(have *job.TypeDecl) error) (bool, *job.TypeDecl, error) {
	if err := d.Validate(); err != nil {
		return false, nil, err
	}
	want := *d
	for range 5 {
		cur, err := s.types.Get(ctx, d.Name)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			want.Paused = false
			data, err := json.Marshal(&want)
			if err != nil {
				return false, nil, fmt.Errorf("encode type %s: %w", d.Name, err)
			}
			if _, err := s.types.Create(ctx, d.Name, data); err != nil {
				if errors.Is(err, jetstream.ErrKeyExists) {
					continue
				}
				return false, nil, fmt.Errorf("declare type %s: %w", d.Name, mapErr(err))
			}
			return true, &want, nil
		}
		if err != nil {
			return false, nil, fmt.Errorf("declare type %s: %w", d.Name, mapErr(err))
		}
		var have job.TypeDecl
		if json.Unmarshal(cur.Value(), &have) == nil {
			if err := check(&have); err != nil {
				return false, nil, err
			}
			want.Paused = have.Paused
			if sameDecl(&have, &want) {
				return false, &have, nil
			}
		}
		data, err := json.Marshal(&want)
		if err != nil {
			return false, nil, fmt.Errorf("encode type %s: %w", d.Name, err)
		}
		if _, err := s.types.Update(ctx, d.Name, data, cur.Revision()); err != nil {
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
			return false, nil, fmt.Errorf("declare type %s: %w", d.Name, mapErr(err))
		}
		return false, &want, nil
	}
	return false, nil, fmt.Errorf("declare type %s: %w", d.Name, ErrStale)
}
