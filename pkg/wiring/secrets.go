package wiring

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Names of the deployment secrets kept in the meta bucket.
const (
	SecretJobID = "secret.job-id"      // derives job ids from idempotency keys
	SecretLinks = "secret.result-link" // signs result links
)

// Secret returns the deployment-wide secret name, creating it on first use.
// Every process of a deployment reads the same value, so job ids and result
// links agree across gateways without configuration.
func Secret(ctx context.Context, meta jetstream.KeyValue, name string) ([]byte, error) {
	for range 3 {
		e, err := meta.Get(ctx, name)
		if err == nil {
			return e.Value(), nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("read secret %s: %w", name, mapErr(err))
		}
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("generate secret %s: %w", name, err)
		}
		if _, err := meta.Create(ctx, name, b); err == nil {
			return b, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("store secret %s: %w", name, mapErr(err))
		}
	}
	return nil, fmt.Errorf("secret %s: could not settle a value", name)
}
