//go:build bench

package main

import "context"

// benchCommand is `jobgate bench`, present only in binaries built with
// -tags bench.
var benchCommand = func(m *Main, ctx context.Context, args []string) error { return m.runBench(ctx, args) }
