// Command webhook-receiver is an example endpoint for jobgate's webhooks. It
// verifies each delivery's Standard Webhooks signature, refuses stale or
// forged ones, and processes every webhook-id once: ids are recorded in a
// bbolt file in the same transaction as the processing, so retries and
// redeliveries (which reuse the id) are acknowledged without being handled
// twice, across restarts too.
//
//	go run ./examples/webhook-receiver --addr 127.0.0.1:9000 \
//	    --secret whsec_... --db receiver.db
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-receiver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("webhook-receiver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "listen address")
	secret := fs.String("secret", os.Getenv("WEBHOOK_SECRET"), `endpoint secret, "whsec_<base64>" or raw (WEBHOOK_SECRET)`)
	dbPath := fs.String("db", "webhook-receiver.db", "bbolt file of processed webhook ids")
	tolerance := fs.Duration("tolerance", 5*time.Minute, "accepted clock difference of webhook-timestamp")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secret == "" {
		return errors.New("--secret (or WEBHOOK_SECRET) is required")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rcv, err := Open(*dbPath, *secret, *tolerance, func(e Event) error {
		log.Info("job event", "webhook_id", e.ID, "type", e.Type, "job", e.Job.ID, "state", e.Job.State)
		return nil
	})
	if err != nil {
		return err
	}
	defer rcv.Close()
	srv := &http.Server{Addr: *addr, Handler: rcv, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("listening", "addr", *addr, "db", *dbPath)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
