package dispatcher

import (
	"testing"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// Every store is required, the broker's too: New names the one missing.
func TestNewNamesAMissingStore(t *testing.T) {
	t.Parallel()
	_, err := New(testConfig(), Stores{}, nil)
	require.EqualError(t, err, "dispatcher: Stores.Jobs is nil: every field is required")
	_, err = New(testConfig(), Stores{Jobs: &natsjs.Store{}, Work: &natsjs.WorkQueue{}, Events: &natsjs.EventStream{}}, nil)
	require.EqualError(t, err, "dispatcher: Stores.Schedule is nil: every field is required")
	_, err = New(testConfig(), Stores{Jobs: &natsjs.Store{}, Work: &natsjs.WorkQueue{}, Events: &natsjs.EventStream{}, Schedule: &natsjs.Schedule{}}, nil)
	require.EqualError(t, err, "dispatcher: Stores.Broker.Jobs is nil: every field is required")

	_, err = NewBatchRelay(BatchRelayConfig{}, BatchRelayStores{Items: &natsjs.Store{}}, nil)
	require.EqualError(t, err, "batch relay: BatchRelayStores.Batches is nil: every field is required")
}
