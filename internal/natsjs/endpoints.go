package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go/jetstream"
)

// Endpoint types (docs/endpoints.md): an operator's declaration, owned by
// jobgate, in the types bucket like any other; its signing keys in the
// meta bucket with the deployment's other secrets, never in the
// declaration every gateway lists.

// ErrNameTaken: the name is declared by a worker (or is built in), not as
// an endpoint type.
var ErrNameTaken = errors.New("type name declared by a worker credential")

// DeclareEndpoint stores an operator's declaration of an endpoint type by
// compare-and-set: created if the name is free, replaced if it is an
// endpoint type already (an operator's pause stays), refused with
// ErrNameTaken if a worker declared it. It returns whether it created the
// type and the declaration as stored: an unchanged declaration is not
// written again (its DeclaredAt stays).
func (s *TypeStore) DeclareEndpoint(ctx context.Context, d *job.TypeDecl) (created bool, stored *job.TypeDecl, err error) {
	if d.Endpoint == nil {
		return false, nil, fmt.Errorf("type %s: %w: no endpoint", d.Name, job.ErrInvalidType)
	}
	return s.put(ctx, d, func(have *job.TypeDecl) error {
		if have.Endpoint == nil {
			return fmt.Errorf("type %s: %w", d.Name, ErrNameTaken)
		}
		return nil
	})
}

// EndpointKeyOverlap is how long a rotated-out signing key still signs
// beside the new one.
const EndpointKeyOverlap = 24 * time.Hour

// EndpointKeys are an endpoint type's signing keys: the current one and,
// for EndpointKeyOverlap after a rotation, the one it replaced.
type EndpointKeys struct {
	Current   []byte    `json:"current"`
	Previous  []byte    `json:"previous,omitempty"`
	RotatedAt time.Time `json:"rotated_at,omitzero"`
	CreatedAt time.Time `json:"created_at"`
}

// Signing returns the keys that sign a request at now: the current one,
// and the previous one within the overlap.
func (k *EndpointKeys) Signing(now time.Time) [][]byte {
	if len(k.Previous) > 0 && now.Sub(k.RotatedAt) < EndpointKeyOverlap {
		return [][]byte{k.Current, k.Previous}
	}
	return [][]byte{k.Current}
}

func endpointSecretKey(typ string) string { return "secret.endpoint." + typ }

// EndpointKeys reads an endpoint type's signing keys; job.ErrNotFound when
// none is stored.
func (s *Secrets) EndpointKeys(ctx context.Context, typ string) (*EndpointKeys, error) {
	k, _, err := s.endpointKeys(ctx, typ)
	return k, err
}

func (s *Secrets) endpointKeys(ctx context.Context, typ string) (*EndpointKeys, uint64, error) {
	e, err := s.kv.Get(ctx, endpointSecretKey(typ))
	if err != nil {
		return nil, 0, fmt.Errorf("endpoint secret of %s: %w", typ, mapErr(err))
	}
	var k EndpointKeys
	if err := json.Unmarshal(e.Value(), &k); err != nil || len(k.Current) == 0 {
		return nil, 0, fmt.Errorf("endpoint secret of %s: undecodable", typ)
	}
	return &k, e.Revision(), nil
}

// SetEndpointKey stores key as the type's only signing key (a type just
// created: whatever a deleted type of the same name left is replaced).
func (s *Secrets) SetEndpointKey(ctx context.Context, typ string, key []byte, now time.Time) error {
	data, err := json.Marshal(EndpointKeys{Current: key, CreatedAt: now})
	if err != nil {
		return err
	}
	if _, err := s.kv.Put(ctx, endpointSecretKey(typ), data); err != nil {
		return fmt.Errorf("store endpoint secret of %s: %w", typ, mapErr(err))
	}
	return nil
}

// CreateEndpointKey stores key as the type's signing key only if it has
// none; ErrExists otherwise.
func (s *Secrets) CreateEndpointKey(ctx context.Context, typ string, key []byte, now time.Time) error {
	data, err := json.Marshal(EndpointKeys{Current: key, CreatedAt: now})
	if err != nil {
		return err
	}
	if _, err := s.kv.Create(ctx, endpointSecretKey(typ), data); err != nil {
		return fmt.Errorf("store endpoint secret of %s: %w", typ, mapErr(err))
	}
	return nil
}

// RotateEndpointKey makes key the type's current signing key; the one it
// replaces signs beside it for EndpointKeyOverlap (a key rotated out
// earlier is dropped). A compare-and-set: two rotations at once both land,
// one after the other.
func (s *Secrets) RotateEndpointKey(ctx context.Context, typ string, key []byte, now time.Time) error {
	for range 5 {
		k, rev, err := s.endpointKeys(ctx, typ)
		if err != nil {
			return err
		}
		next := EndpointKeys{Current: key, Previous: k.Current, RotatedAt: now, CreatedAt: k.CreatedAt}
		data, err := json.Marshal(next)
		if err != nil {
			return err
		}
		if _, err := s.kv.Update(ctx, endpointSecretKey(typ), data, rev); err != nil {
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
			return fmt.Errorf("rotate endpoint secret of %s: %w", typ, mapErr(err))
		}
		return nil
	}
	return fmt.Errorf("rotate endpoint secret of %s: %w", typ, ErrStale)
}

// DeleteEndpointKeys removes a deleted type's signing keys.
func (s *Secrets) DeleteEndpointKeys(ctx context.Context, typ string) error {
	if err := s.kv.Purge(ctx, endpointSecretKey(typ)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete endpoint secret of %s: %w", typ, mapErr(err))
	}
	return nil
}
