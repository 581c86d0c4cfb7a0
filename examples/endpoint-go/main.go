// Command endpoint-go is the handler of an endpoint type (docs/endpoints.md)
// written with pkg/endpoint: jobgate POSTs each attempt of a "greeting"
// job to it, signed with the type's secret, and the answer is the job's
// outcome. It runs no worker process and links no NATS.
//
//	JOBGATE_ENDPOINT_SECRET=whsec_... ADDR=127.0.0.1:9090 go run ./examples/endpoint-go
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jobgate/jobgate/pkg/endpoint"
)

// Params are the greeting type's params (types.yaml declares their schema).
type Params struct {
	Name     string `json:"name"`
	Language string `json:"language"`
}

var greetings = map[string]string{"en": "Hello", "fr": "Bonjour", "de": "Hallo"}

// greet is the work of one attempt: the result's bytes, or a refusal the
// job's owner reads.
func greet(ctx context.Context, a *endpoint.Attempt) endpoint.Answer {
	var p Params
	if err := json.Unmarshal(a.Params, &p); err != nil {
		return endpoint.Reject("the params are not a greeting's")
	}
	word, ok := greetings[p.Language]
	if !ok {
		return endpoint.Reject(fmt.Sprintf("no greeting in %q yet", p.Language))
	}
	if strings.EqualFold(p.Name, "later") {
		// Something of ours is busy: jobgate tries again, not before 5 s.
		return endpoint.RetryLater(5 * time.Second)
	}
	return endpoint.Result([]byte(fmt.Sprintf("%s, %s! (job %s, attempt %d)\n", word, p.Name, a.ID, a.Attempt)))
}

// newHandler serves the greeting type's attempts, signed with secret
// (several during a rotation).
func newHandler(secrets ...string) (http.Handler, error) {
	v, err := endpoint.NewVerifier(secrets...)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /jobs/greeting", endpoint.Handler(v, greet))
	return mux, nil
}

func main() {
	h, err := newHandler(strings.Fields(os.Getenv("JOBGATE_ENDPOINT_SECRET"))...)
	if err != nil {
		slog.Error("set JOBGATE_ENDPOINT_SECRET to the secret PUT /v1/admin/types/greeting answered", "err", err)
		os.Exit(2)
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:9090"
	}
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	slog.Info("greeting endpoint listening", "addr", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Error("serve", "err", err)
		os.Exit(1)
	}
}
