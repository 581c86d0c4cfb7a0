package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// The declared types a gateway keeps are bounded: a worker declaring more
// than job.MaxTypes adds nothing past the bound, while known types still
// take new versions.
func TestTypeRegistryIsBounded(t *testing.T) {
	t.Parallel()
	reg := newTypeRegistry(nil, slog.New(slog.DiscardHandler))
	decl := func(name string) *job.TypeDecl {
		return &job.TypeDecl{Name: name, Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
			TimeoutSeconds: 1, Attempts: 1, MaxResultBytes: 1, ContentType: "text/plain"}
	}
	for i := range job.MaxTypes {
		reg.declare(decl(fmt.Sprintf("t%d", i)))
	}
	reg.declare(decl("one_too_many"))
	_, ok := reg.decl("one_too_many")
	require.False(t, ok)
	_, ok = reg.schemas.Lookup("one_too_many")
	require.False(t, ok)
	require.Len(t, reg.list(time.Now()), job.MaxTypes)

	again := decl("t7")
	again.Attempts = 5
	reg.declare(again)
	d, ok := reg.decl("t7")
	require.True(t, ok)
	require.Equal(t, 5, d.Attempts, "a known type still takes its new version")
}

// flakySource fails to start its watches a few times, as a cluster electing
// a leader answers "JetStream system temporarily unavailable", then
// delivers no declarations (caught up at once).
type flakySource struct{ failures int }

func (f *flakySource) WatchTypes(_ context.Context, fn func(*natsjs.TypeChange)) error {
	if f.failures > 0 {
		f.failures--
		return errors.New("nats: JetStream system temporarily unavailable")
	}
	go fn(nil)
	return nil
}

func (f *flakySource) WatchWorkers(context.Context, func(string, *natsjs.Presence)) error { return nil }

// A gateway that starts while the cluster cannot start its watch of the
// declarations tries again within its load bound instead of exiting (seen
// in the chaos run of 2026-12-01: "start gateway: job types: JetStream
// system temporarily unavailable", exit status 1).
func TestTypeRegistryStartOutlastsAMomentaryOutage(t *testing.T) {
	t.Parallel()
	reg := newTypeRegistry(&flakySource{failures: 3}, slog.New(slog.DiscardHandler))
	require.NoError(t, reg.start(context.Background(), context.Background()))
	reg.stop()
}

// GET /v1/types/{name} does not name the credential that declared a type.
func TestTypeInfoHidesTheOwner(t *testing.T) {
	t.Parallel()
	data, err := json.Marshal(typeInfo{TypeDecl: &job.TypeDecl{Name: "export", Owner: "b65e9384db71d1fa"}, Workers: 1})
	require.NoError(t, err)
	require.NotContains(t, string(data), "owner")
	require.NotContains(t, string(data), "b65e9384db71d1fa")
}
