package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// submit --batch FILE --wait: the batch id at once, one bar for the batch
// (jobs ended of all), then each job with its state.
func TestCLISubmitBatchWait(t *testing.T) {
	t.Parallel()
	b := setupServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	file := filepath.Join(b.dir, "batch.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(`{"case_id":1,"revision":1,"pages":2}

{"case_id":2,"revision":1,"pages":2}
{"case_id":3,"revision":1,"pages":2}
`), 0o600))
	out, errOut, err := b.run(t, ctx, "submit", "--batch", file, "--wait")
	require.NoError(t, err, errOut)
	ls := outLines(out)
	require.Len(t, ls, 4, out)
	require.True(t, job.ValidBatchID(ls[0]), "first line is the batch id: %q", ls[0])
	for _, l := range ls[1:] {
		id, state, ok := strings.Cut(l, "  ")
		require.True(t, ok, l)
		require.True(t, job.ValidID(id), l)
		require.Equal(t, "succeeded", state)
	}
	require.Contains(t, errOut, "3/3", "one bar counts the batch's jobs")
	require.Contains(t, errOut, "3 succeeded, 0 failed, 0 canceled")

	// A bad line is refused before anything is sent.
	require.NoError(t, os.WriteFile(file, []byte("{\"case_id\":1}\nnot json\n"), 0o600))
	_, _, err = b.run(t, ctx, "submit", "--batch", file)
	require.ErrorContains(t, err, "line 2 is not one JSON object")
}

// watch --all prints every change of the caller's jobs on one stream until
// interrupted.
func TestCLIWatchAll(t *testing.T) {
	t.Parallel()
	b := setupServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut syncBuffer
	m := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return b.env[k] }}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(wctx, []string{"watch", "--all"}) }()

	// The stream starts with what is stored from its start on: submit
	// until a job of ours shows up, then follow that job to its end.
	var id string
	require.Eventually(t, func() bool {
		if id == "" || !strings.Contains(out.String(), id) {
			// (no require here: this runs on Eventually's goroutine)
			o, _, err := b.run(t, ctx, "submit", "--new", "--param", "case_id=5", "--param", "revision=1", "--param", "pages=2")
			if err == nil {
				id = strings.TrimSpace(o)
			}
			return false
		}
		return true
	}, time.Minute, 300*time.Millisecond)
	require.Eventually(t, func() bool {
		for _, l := range outLines(out.String()) {
			if strings.Contains(l, id) && strings.Contains(l, "succeeded") {
				return true
			}
		}
		return false
	}, time.Minute, 20*time.Millisecond, out.String())
	stop()
	require.NoError(t, <-done, errOut.String())
}
