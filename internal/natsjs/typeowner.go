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
