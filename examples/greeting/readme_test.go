package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/stretchr/testify/require"
)

// The README shows this worker whole: the two must not drift apart.
func TestREADMEShowsThisWorker(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	code, err := os.ReadFile("main.go")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(readme), "```go\n"+string(code)+"```"), "README's worker differs from examples/greeting/main.go")
}

// The params schema generated from Params is one a gateway accepts.
func TestParamsMakeAValidType(t *testing.T) {
	t.Parallel()
	w, err := worker.New(worker.Config{})
	require.NoError(t, err)
	err = worker.Register(w, worker.Type[Params]{Name: "greeting",
		Work: func(context.Context, *worker.Job[Params]) error { return nil }})
	require.NoError(t, err, "the generated schema bounds every string and closes the object")

	type unbounded struct {
		Name string `json:"name"`
	}
	err = worker.Register(w, worker.Type[unbounded]{Name: "unbounded",
		Work: func(context.Context, *worker.Job[unbounded]) error { return nil }})
	require.ErrorContains(t, err, "maxLength", "a string without a bound is refused before anything is declared")
}
