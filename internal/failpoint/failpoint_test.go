package failpoint

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFailpoints(t *testing.T) {
	t.Parallel()
	off, err := Parse("")
	require.NoError(t, err)
	require.NoError(t, off.Hit(GatewayAfterCommit))
	var nilSet *Set
	require.NoError(t, nilSet.Hit(GatewayAfterCommit))

	s, err := Parse("gateway.after-commit=exit, renderer.mid-render=error")
	require.NoError(t, err)
	code := -1
	s.Exit = func(c int) { code = c }
	require.NoError(t, s.Hit(GatewayAfterCommit))
	require.Equal(t, 3, code)
	require.ErrorIs(t, s.Hit(RendererMidRender), ErrInjected)
	require.NoError(t, s.Hit("elsewhere"))

	for _, bad := range []string{"x", "x=boom", "=exit"} {
		_, err := Parse(bad)
		require.Error(t, err, bad)
	}
}
