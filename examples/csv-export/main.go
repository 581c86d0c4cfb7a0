// Command csv-export is a jobgate worker for the job type
// export_sales_report: a streamed CSV of one region's sales over a date
// range. It is written with the public package
// github.com/jobgate/jobgate/pkg/worker only; see README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jobgate/jobgate/pkg/worker"
)

func main() {
	fs := flag.NewFlagSet("csv-export", flag.ContinueOnError)
	url := fs.String("nats", envOr("JOBGATE_NATS_URL", "nats://127.0.0.1:4222"), "NATS server URLs, comma separated (env JOBGATE_NATS_URL)")
	user := fs.String("user", os.Getenv("JOBGATE_WORKER_USER"), "worker user from `jobgate nats-user --worker --type export_sales_report` (env JOBGATE_WORKER_USER)")
	password := fs.String("password", "", "worker password; prefer the env JOBGATE_WORKER_PASSWORD, which ps does not show")
	name := fs.String("name", "", "this process's name in job records (default host-pid-random)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if *password == "" {
		*password = os.Getenv("JOBGATE_WORKER_PASSWORD")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := worker.Config{URL: *url, User: *user, Password: *password, Name: *name, Logger: log}
	if err := run(ctx, cfg); err != nil {
		log.Error("csv-export stopped", "err", err)
		os.Exit(1)
	}
}

// run serves export_sales_report jobs until ctx ends, then lets the
// running exports finish (the package drains).
func run(ctx context.Context, cfg worker.Config) error {
	w, err := worker.New(cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := worker.Register(w, exportType()); err != nil {
		return fmt.Errorf("declare %s: %w", exportType().Name, err)
	}
	return w.Run(ctx)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
