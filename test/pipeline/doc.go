// Package pipeline holds no code: its tests run dispatchers, brokers,
// renderers and workers of user-declared types together on one embedded
// JetStream, as `jobgate serve` or a fleet of `jobgate dispatcher` and
// worker processes do, to show that every admitted job ends, and ends once,
// and that a slow type does not hold up another.
package pipeline
