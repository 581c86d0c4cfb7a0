// Package e2e holds end-to-end tests that drive the whole system from the
// outside: the reviewer's page in a real Chromium (chromedp) against an
// in-process jobgate built by system as `jobgate serve` builds it
// (embedded JetStream, notifier, dispatcher, renderer, gateway). It has no
// code of its own besides the tests and their harness.
package e2e
