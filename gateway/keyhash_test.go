package gateway

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// The stored key_hash (also the one in log lines) is keyed by the
// deployment secret: a guessable key cannot be recovered from it by hashing
// candidates.
func TestStoredKeyHashIsKeyedByTheDeploymentSecret(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	const key = "r-63817"
	r := b.submit(t, tok, key, permit)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	id := r.job(t).ID

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := b.res.Jobs.Get(ctx, job.StoreKey("4", "reviewer-47", id))
	require.NoError(t, err)
	secret, err := b.res.Secrets.Get(ctx, natsjs.SecretJobID)
	require.NoError(t, err)
	require.NotEqual(t, job.HashKey(key), rec.KeyHash, "not the plain SHA-256 prefix")
	require.Equal(t, job.NewIDDeriver(secret).KeyHash("4", "reviewer-47", key), rec.KeyHash)
}
