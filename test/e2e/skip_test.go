package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSkippingTheBrowserFailsInCI(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	reason, err := skipBrowser(env())
	require.NoError(t, err)
	require.Empty(t, reason, "by default the browser test runs")
	reason, err = skipBrowser(env("JOBGATE_SKIP_BROWSER", "1"))
	require.NoError(t, err)
	require.NotEmpty(t, reason, "a developer may skip it")
	for _, ci := range []string{"true", "TRUE", "1"} {
		_, err = skipBrowser(env("JOBGATE_SKIP_BROWSER", "1", "CI", ci))
		require.Error(t, err, "CI=%s must not skip silently", ci)
	}
	reason, err = skipBrowser(env("CI", "true"))
	require.NoError(t, err)
	require.Empty(t, reason)
}
