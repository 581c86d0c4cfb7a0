package metrics

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// alertsDir holds the alert rules and their promtool tests.
var alertsDir = filepath.Join("..", "..", "deploy", "prometheus")

// The alert rules are valid and each fires on the situation it names and
// stays quiet on its near miss (promtool test rules, alerts_test.yaml).
func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool := findPromtool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = alertsDir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		require.Contains(t, string(out), "SUCCESS")
	}
}
