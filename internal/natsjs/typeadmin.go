package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go/jetstream"
)

// An operator's changes of a declared type (the admin API): pause and
// resume, written on the stored declaration so that every broker and
// gateway watching the bucket sees them, and delete. Each is a
// compare-and-set on the declaration: a worker declaring the type at the
// same moment loses nothing and undoes nothing.

// SetPaused pauses (or resumes) a declared type and returns its
// declaration as stored; a type already so is not written again. A type
// that is not declared is job.ErrNotFound.
func (s *TypeStore) SetPaused(ctx context.Context, name string, paused bool) (*job.TypeDecl, error) {
	for range 5 {
		cur, err := s.types.Get(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("type %s: %w", name, mapErr(err))
		}
		d, err := decodeDecl(cur.Value())
		if err != nil {
			return nil, fmt.Errorf("type %s: %w", name, err)
		}
		if d.Paused == paused {
			return d, nil
		}
		d.Paused = paused
		data, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("encode type %s: %w", name, err)
		}
		if _, err := s.types.Update(ctx, name, data, cur.Revision()); err != nil {
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
			return nil, fmt.Errorf("pause type %s: %w", name, mapErr(err))
		}
		return d, nil
	}
	return nil, fmt.Errorf("pause type %s: %w", name, ErrStale)
}

// DeleteType removes a declared type once check accepts its declaration as
// it stands: the delete is a compare-and-set on the revision check saw, so
// a declaration (or pause) written after the check keeps the type, and the
// call answers ErrStale. check's error is returned as it is. A type that is
// not declared is job.ErrNotFound. The name is then free: any credential
// may declare it (DeclareOwned).
func (s *TypeStore) DeleteType(ctx context.Context, name string, check func(*job.TypeDecl) error) error {
	cur, err := s.types.Get(ctx, name)
	if err != nil {
		return fmt.Errorf("type %s: %w", name, mapErr(err))
	}
	d, err := decodeDecl(cur.Value())
	if err != nil {
		return fmt.Errorf("type %s: %w", name, err)
	}
	if err := check(d); err != nil {
		return err
	}
	if err := s.types.Delete(ctx, name, jetstream.LastRevision(cur.Revision())); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("delete type %s: changed meanwhile: %w", name, ErrStale)
		}
		return fmt.Errorf("delete type %s: %w", name, mapErr(err))
	}
	return nil
}
