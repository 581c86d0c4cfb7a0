package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// runHealth is `jobgate health [--url URL]`: the readiness probe of an
// image that has no shell or curl (Compose's healthcheck, an exec probe).
// It exits 0 when URL answers 200 within 2 s, 1 otherwise, saying why.
func (m *Main) runHealth(ctx context.Context, args []string) error {
	fs := newFlagSet("health", m)
	url := fs.String("url", "http://127.0.0.1:8080/readyz",
		"what to ask: a gateway's /readyz, or the ops_addr's of a process without one")
	if err := parse(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return &usageError{fmt.Sprintf("--url: %v", err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not healthy: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not healthy: %s answered %s", *url, resp.Status)
	}
	fmt.Fprintln(m.Stdout, "ok")
	return nil
}
