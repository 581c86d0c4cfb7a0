package broker

import (
	"testing"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// Every store is required, and the connection: New names the one missing,
// also when it is a nil adapter.
func TestNewNamesAMissingStore(t *testing.T) {
	t.Parallel()
	_, err := New(testConfig(), Stores{}, nil)
	require.EqualError(t, err, "broker: Stores.Jobs is nil: every field is required")
	st := Stores{Jobs: &natsjs.Store{}, Work: &natsjs.WorkQueue{}, Events: &natsjs.EventStream{}, Secrets: &natsjs.Secrets{},
		Types: &natsjs.TypeStore{}, Slots: &natsjs.SlotStore{}, Results: (*natsjs.Resources)(nil)}
	_, err = New(testConfig(), st, nil)
	require.EqualError(t, err, "broker: Stores.Results is nil: every field is required")
	st.Results = &natsjs.Resources{}
	_, err = New(testConfig(), st, nil)
	require.EqualError(t, err, "broker: Stores.Conn is nil: every field is required")
}
