package main

import (
	"context"
	"github.com/jobgate/jobgate/test/jobtest"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rfc3339 matches a time with its zone (Z or an offset).
var rfc3339 = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)`)

// What the client commands say on screen: times with their zone, a cursor
// hint that can be pasted as is, and a repeated submit that makes a second
// job says so.
func TestCLIWording(t *testing.T) {
	t.Parallel()
	b := setupServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"submit", "--param", "case_id=47", "--param", "revision=29", "--param", "pages=2"}

	out, errOut, err := b.run(t, ctx, args...)
	require.NoError(t, err, errOut)
	first := strings.TrimSpace(out)
	require.NotContains(t, errOut, "new job", "the first submit is simply new")
	// The first submit is finished (it printed its id): the same command
	// again makes a second job, and says so, naming the first.
	out, errOut, err = b.run(t, ctx, args...)
	require.NoError(t, err, errOut)
	second := strings.TrimSpace(out)
	require.NotEqual(t, first, second)
	require.Contains(t, errOut, "new job: the same request was submitted before as "+first)
	require.Contains(t, errOut, "this is a second job")
	out, errOut, err = b.run(t, ctx, args...)
	require.NoError(t, err, errOut)
	require.Contains(t, errOut, "new job: the same request was submitted before as "+second, "the newest earlier one is named")
	require.NotEqual(t, second, strings.TrimSpace(out))

	out, _, err = b.run(t, ctx, "status", first)
	require.NoError(t, err)
	created := ""
	for _, l := range outLines(out) {
		if strings.HasPrefix(l, "created:") {
			created = l
		}
	}
	require.Regexp(t, rfc3339, created, "status shows times with their zone:\n%s", out)

	out, errOut, err = b.run(t, ctx, "jobs", "--limit", "2")
	require.NoError(t, err)
	rows := outLines(out)
	require.Len(t, rows, 3, out)
	require.Regexp(t, rfc3339, rows[1], "jobs shows times with their zone")
	require.Contains(t, errOut, "more: jobgate jobs --limit 2 --cursor ")
	// The hint works as printed: it lists the rest.
	hint := strings.Fields(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(errOut, "more: ")), " (or --all)"))
	require.Equal(t, []string{"jobgate", "jobs", "--limit", "2", "--cursor"}, hint[:5])
	out, _, err = b.run(t, ctx, hint[1:]...)
	require.NoError(t, err)
	require.Len(t, outLines(out), 2, "header and the third job:\n%s", out)
}

// --retry-for is a budget the command uses to its end: against a gateway
// that is down, `--retry-for 2s` gives up close to 2 s after it began (not
// when the next jittered wait would overshoot, which was as early as 0.55 s),
// with the temporary-failure exit code.
func TestCLIRetryForIsHonoured(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now: connection refused
	b := &cliBundle{env: map[string]string{"JOBGATE_URL": down, "JOBGATE_TOKEN": "t.t.t", "JOBGATE_JOURNAL": t.TempDir() + "/j.db"}}
	for _, tc := range []struct {
		args     []string
		min, max time.Duration
	}{
		{[]string{"status", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--retry-for", "2s"}, 1900 * time.Millisecond, 3 * time.Second},
		{[]string{"jobs", "--retry-for", "0"}, 0, 500 * time.Millisecond},
	} {
		start := time.Now()
		_, _, err := b.run(t, context.Background(), tc.args...)
		took := time.Since(start)
		require.Error(t, err)
		require.Equal(t, exitTempFail, ExitCode(err), "%v: %v", tc.args, err)
		require.GreaterOrEqual(t, took, tc.min, "%v gave up early: %v", tc.args, err)
		require.Less(t, took, tc.max, "%v gave up late: %v", tc.args, err)
	}
}

// The serve banner shows where NATS clients (event subscribers) connect
// when the embedded server listens for them.
func TestServeBannerShowsNATSListen(t *testing.T) {
	t.Parallel()
	nats := jobtest.FreeAddr(t)
	stop, out := runServe(t, t.TempDir(), jobtest.FreeAddr(t), "--nats-listen", nats)
	defer stop()
	require.Contains(t, out.String(), "NATS:      nats://"+nats)
	stop2, out2 := runServe(t, t.TempDir(), jobtest.FreeAddr(t))
	defer stop2()
	require.NotContains(t, out2.String(), "NATS:")
}
