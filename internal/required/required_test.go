package required

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type getter interface{ Get() int }

type impl struct{}

func (*impl) Get() int { return 1 }

type inner struct {
	Conn *impl
}

type Stores struct {
	Jobs  getter
	Watch func() error
	Inner inner
	Size  int // a value is never nil
}

func TestFieldsNamesTheFirstNilField(t *testing.T) {
	full := Stores{Jobs: &impl{}, Watch: func() error { return nil }, Inner: inner{Conn: &impl{}}}
	require.NoError(t, Fields(full))

	missing := full
	missing.Jobs = nil
	require.EqualError(t, Fields(missing), "Stores.Jobs is nil: every field is required")

	typedNil := full
	typedNil.Jobs = (*impl)(nil) // what a mapping from a nil adapter gives
	require.EqualError(t, Fields(typedNil), "Stores.Jobs is nil: every field is required")

	nested := full
	nested.Inner.Conn = nil
	require.EqualError(t, Fields(nested), "Stores.Inner.Conn is nil: every field is required")

	noFunc := full
	noFunc.Watch = nil
	require.EqualError(t, Fields(noFunc), "Stores.Watch is nil: every field is required")

	require.Error(t, Fields(&full), "a pointer is not a struct")
}
