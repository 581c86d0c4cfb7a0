//go:build !bench

package main

import "context"

// benchCommand is nil in the production binary: the load generator is built
// only with -tags bench (make bench).
var benchCommand func(m *Main, ctx context.Context, args []string) error
