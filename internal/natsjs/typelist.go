package natsjs

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StoredTypeChange is a TypeChange with the time JetStream stored the
// declaration (zero for a removal). A declaration's DeclaredAt is what its
// worker wrote, and a worker may write any time; Stored is the server's.
type StoredTypeChange struct {
	TypeChange
	Stored time.Time
}

// WatchTypesStored is WatchTypes with each declaration's storage time: it
// sends every current declaration, then nil (caught up), then every
// change, until ctx ends. Undecodable entries are skipped.
func (s *TypeStore) WatchTypesStored(ctx context.Context, fn func(*StoredTypeChange)) error {
	return watchBucket(ctx, s.types, func(e jetstream.KeyValueEntry) {
		switch {
		case e == nil:
			fn(nil)
		case e.Operation() != jetstream.KeyValuePut:
			fn(&StoredTypeChange{TypeChange: TypeChange{Removed: e.Key()}})
		default:
			if d, err := decodeDecl(e.Value()); err == nil && d.Name == e.Key() {
				fn(&StoredTypeChange{TypeChange: TypeChange{Decl: d}, Stored: e.Created()})
			}
		}
	})
}
