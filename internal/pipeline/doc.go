// Package pipeline holds no code: its tests run dispatchers and renderers
// together on one embedded JetStream, as `jobgate serve` or a fleet of
// `jobgate dispatcher` and `jobgate renderer` processes do, to show that
// every admitted job ends, and ends once.
package pipeline
