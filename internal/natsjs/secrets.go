package natsjs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names of the deployment secrets kept in the meta bucket.
const (
	SecretJobID = "secret.job-id"      // derives job ids from idempotency keys
	SecretLinks = "secret.result-link" // signs result links
	// SecretCallbacks signs the callback tokens of asynchronous endpoint
	// attempts (internal/endpointcb).
	SecretCallbacks = "secret.endpoint-callback"
)

// secret returns the deployment-wide secret name, creating it on first use.
// Every process of a deployment reads the same value, so job ids and result
// links agree across gateways without configuration.
func secret(ctx context.Context, meta jetstream.KeyValue, name string) ([]byte, error) {
	// On a cluster, a bucket created a moment ago may not answer reads on
	// every node yet ("no responders"): wait for it, boundedly.
	patience := time.Now().Add(30 * time.Second)
	for tries := 0; tries < 3; tries++ {
		e, err := meta.Get(ctx, name)
		if err == nil {
			return e.Value(), nil
		}
		if Unavailable(err) && ctx.Err() == nil && time.Now().Before(patience) {
			tries--
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("read secret %s: %w: %w", name, mapErr(err), ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
			continue
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
