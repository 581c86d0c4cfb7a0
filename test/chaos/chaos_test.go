package chaos

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestChaosShort is the seeded fault test in small: a minute of faults
// against every component as its own process on a real three-node NATS
// cluster, then the checker over the whole history. It fails on any
// anomaly and names the seed; JOBGATE_CHAOS_SEED replays another one.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 9 processes for about a minute and a half")
	}
	seed := uint64(20260101)
	if s := os.Getenv("JOBGATE_CHAOS_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, hist, err := Run(ctx, Options{
		Seed:     seed,
		Duration: 40 * time.Second,
		Bound:    2 * time.Minute,
		Clients:  4,
		Lanes:    2,
		FaultGap: 2 * time.Second,
		// Holds of 0.6-4.4s: long enough for leader elections, redeliveries
		// and reconnects to happen, short enough for ~15 faults.
		FaultHold: 2500 * time.Millisecond,
		WorkDir:   dir,
		Logf:      t.Logf,
	})
	require.NoError(t, err, "seed %d", seed)
	t.Log("\n" + rep.String())
	if len(rep.Anomalies) > 0 {
		// Keep the evidence: the temp dir goes with the test.
		keep, kerr := os.MkdirTemp("", "jobgate-chaos-failed-")
		if kerr == nil {
			_ = os.CopyFS(keep, os.DirFS(dir))
			t.Logf("history and logs kept in %s (history %s)", keep, hist)
		}
		t.Fatalf("%d anomalies with seed %d; replay with JOBGATE_CHAOS_SEED=%d", len(rep.Anomalies), seed, seed)
	}
}
