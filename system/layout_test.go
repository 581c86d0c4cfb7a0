package system

import (
	"testing"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/stretchr/testify/require"
)

func TestTheByteBudgetsReachTheLayoutAndTheEmbeddedServer(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.StoreMaxBytes, c.ResultsMaxBytes = 128<<20, 512<<20
	l := (&System{settings: c}).layout()
	require.EqualValues(t, 128<<20, l.StoreMaxBytes)
	require.EqualValues(t, 512<<20, l.ResultsMaxBytes)
	require.EqualValues(t, 6*128<<20+128<<20/4+512<<20+4*64<<20, l.StorageReserve(), "what an embedded server is given (the scheduled set a quarter of a store)")
}
