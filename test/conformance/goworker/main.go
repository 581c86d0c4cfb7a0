// Command goworker is the conformance suite's Go worker
// (internal/conformance): the same job types and handlers as
// sdk/typescript/test/conformance-worker.ts, on pkg/worker. It prints one
// JSON line per thing the suite checks.
//
// Environment: JOBGATE_NATS_URL, JOBGATE_WORKER_USER, JOBGATE_WORKER_PASSWORD,
// CONF_SPEC (testdata/types.json), CONF_KINDS (comma-separated kinds of
// CONF_SPEC to run), CONF_PREFIX (type name prefix of unshared kinds),
// CONF_GATES (the directory whose files open hold-mode gates), CONF_NAME,
// CONF_LABEL (what its handlers write: "done by <label>"), CONF_HEARTBEAT_MS,
// CONF_DRAIN_MS (docs/conformance.md). CONF_BREAK makes it skip a duty, for
// the runner's own tests: "cancel" (a handler that never sees its job
// canceled) or "drain" (SIGTERM ends the process at once, giving nothing
// back).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/pkg/worker"
)

type params struct {
	Mode    string `json:"mode"`
	Blocks  int    `json:"blocks"`
	Tail    int    `json:"tail"`
	Seed    int    `json:"seed"`
	Gate    string `json:"gate"`
	Message string `json:"message"`
}

type kind struct {
	TimeoutSeconds int    `json:"timeout_seconds"`
	Attempts       int    `json:"attempts"`
	MaxResultBytes int64  `json:"max_result_bytes"`
	ContentType    string `json:"content_type"`
	Concurrency    int    `json:"concurrency"`
	Shared         bool   `json:"shared"`
}

var out struct {
	sync.Mutex
	enc *json.Encoder
}

func say(event string, fields map[string]any) {
	m := map[string]any{"event": event, "impl": "go"}
	for k, v := range fields {
		m[k] = v
	}
	out.Lock()
	_ = out.enc.Encode(m)
	out.Unlock()
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	if def == "" {
		fmt.Fprintf(os.Stderr, "%s is not set\n", k)
		os.Exit(2)
	}
	return def
}

func ms(k, def string) time.Duration {
	n, err := strconv.Atoi(env(k, def))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", k, err)
		os.Exit(2)
	}
	return time.Duration(n) * time.Millisecond
}

func main() {
	out.enc = json.NewEncoder(os.Stdout)
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	say("stopped", nil)
}

func run() error {
	raw, err := os.ReadFile(env("CONF_SPEC", ""))
	if err != nil {
		return err
	}
	var spec struct {
		Schema json.RawMessage `json:"schema"`
		Types  map[string]kind `json:"types"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	prefix, gates, label := env("CONF_PREFIX", "go"), env("CONF_GATES", ""), env("CONF_LABEL", "go")
	broken := os.Getenv("CONF_BREAK")
	w, err := worker.New(worker.Config{
		URL: env("JOBGATE_NATS_URL", ""), User: env("JOBGATE_WORKER_USER", ""), Password: env("JOBGATE_WORKER_PASSWORD", ""),
		Name:              env("CONF_NAME", "go-conformance-"+strconv.Itoa(os.Getpid())),
		HeartbeatInterval: ms("CONF_HEARTBEAT_MS", "500"), DrainTimeout: ms("CONF_DRAIN_MS", "1000"), PullWait: time.Second,
		// Its logs on stderr, as the TypeScript worker's: the harness shows
		// them when a scenario fails, and some scenarios read them.
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil)),
		OnAttempt: func(typ, outcome string, took time.Duration) {
			say("attempt", map[string]any{"type": typ, "outcome": outcome, "took_ms": took.Milliseconds()})
		},
	})
	if err != nil {
		return err
	}
	work := func(ctx context.Context, j *worker.Job[params]) error {
		p := j.Params
		traceID := ""
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			traceID = sc.TraceID().String()
		}
		say("started", map[string]any{"id": j.ID, "type": j.Type, "attempt": j.Attempt, "mode": p.Mode, "trace_id": traceID})
		switch p.Mode {
		case "result":
			for i := range p.Blocks {
				if _, err := io.WriteString(j.Output(), fmt.Sprintf("%d %d ü€\n", i, p.Seed)); err != nil {
					return err
				}
				b := make([]byte, 1000)
				for k := range b {
					b[k] = byte(i*7 + k*13 + p.Seed)
				}
				if _, err := j.Output().Write(b); err != nil {
					return err
				}
				j.Progress(i+1, p.Blocks, "blocks")
			}
			if p.Tail > 0 {
				t := make([]byte, p.Tail)
				for k := range t {
					t[k] = byte(k*31 + p.Seed)
				}
				if _, err := j.Output().Write(t); err != nil {
					return err
				}
			}
			return nil
		case "hold":
			j.Progress(1, 2, "steps")
			if broken == "cancel" {
				ctx = context.WithoutCancel(ctx)
			}
			for {
				if ctx.Err() != nil {
					say("aborted", map[string]any{"id": j.ID, "attempt": j.Attempt, "reason": reason(ctx)})
					return context.Cause(ctx)
				}
				if p.Gate != "" {
					if _, err := os.Stat(filepath.Join(gates, p.Gate)); err == nil {
						j.Progress(2, 2, "steps")
						_, err := fmt.Fprintf(j.Output(), "done by %s at attempt %d\n", label, j.Attempt)
						return err
					}
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		case "permanent":
			return worker.Permanent(errors.New(p.Message))
		default:
			return errors.New(p.Message)
		}
	}
	for _, name := range strings.Split(env("CONF_KINDS", ""), ",") {
		k, ok := spec.Types[name]
		if !ok {
			return fmt.Errorf("no kind %s in the spec", name)
		}
		typ := prefix + "_" + name
		if k.Shared {
			typ = "shared_" + name
		}
		err := worker.Register(w, worker.Type[params]{
			Name: typ, Description: fmt.Sprintf("conformance %s (%s)", name, map[bool]string{true: "shared", false: prefix}[k.Shared]),
			Schema: spec.Schema, Timeout: time.Duration(k.TimeoutSeconds) * time.Second, Attempts: k.Attempts,
			MaxResultBytes: k.MaxResultBytes, ContentType: k.ContentType, Concurrency: k.Concurrency, Work: work,
		})
		if err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Start(sctx); err != nil {
		return err
	}
	say("ready", map[string]any{"name": w.Name()})
	<-ctx.Done()
	if broken == "drain" {
		os.Exit(0)
	}
	say("stopping", nil)
	return w.Stop(context.Background())
}

// reason names what ended a handler's context, as the TypeScript worker's
// AbortedError does. pkg/worker does not tell a cancel from another loss of
// the claim: both are "lost", and so is a lease that ran out.
func reason(ctx context.Context) string {
	cause := fmt.Sprint(context.Cause(ctx))
	switch {
	case strings.Contains(cause, "no longer held"), strings.Contains(cause, "lease ran out"):
		return "lost"
	case strings.Contains(cause, "shutting down"):
		return "shutdown"
	case strings.Contains(cause, "time budget"), errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "timeout"
	}
	return cause
}
