package renderer

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/jobtest"
)

// BenchmarkJob63 is one permit report job end to end through a renderer on
// a real embedded JetStream: admission (record + work message), claim,
// render with checkpoints, result object, succeeded.
func BenchmarkJob63(b *testing.B) { benchJob(b, 63) }

func BenchmarkJob2000(b *testing.B) { benchJob(b, 2000) }

func benchJob(b *testing.B, pages int) {
	env := jobtest.Start(b)
	conn := env.Connect(b, "bench")
	cfg := testConfig()
	cfg.Concurrency = 1
	cfg.RenderTimeout = time.Minute
	r, err := New(cfg, worker.Config{Conn: env.Connect(b, "renderer").NC})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Stop(context.Background()) })
	i := 0
	for b.Loop() {
		i++
		rec := env.Admit(b, conn.Res, jobtest.Request{Key: jobtest.ID("bench", i), Pages: pages})
		done := jobtest.Terminal(b, conn.Res, rec.Key(), time.Minute)
		if done.State != job.StateSucceeded {
			b.Fatalf("job ended %s", done.State)
		}
	}
}
