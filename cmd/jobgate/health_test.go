package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// `jobgate health` is the probe of an image without a shell: 0 on a 200,
// 1 on anything else or no answer, 2 on a bad flag.
func TestHealthExitsZeroOnlyOnA200(t *testing.T) {
	t.Parallel()
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	run := func(args ...string) error {
		var out, errOut bytes.Buffer
		return (&Main{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}).Run(context.Background(), append([]string{"health"}, args...))
	}
	require.NoError(t, run("--url", srv.URL+"/readyz"))
	ready = false
	err := run("--url", srv.URL+"/readyz")
	require.ErrorContains(t, err, "503")
	require.Equal(t, 1, ExitCode(err))
	srv.Close()
	require.Equal(t, 1, ExitCode(run("--url", srv.URL+"/readyz")), "no answer")
	require.Equal(t, 2, ExitCode(run("--nope")))
}
