// Package gateway is jobgate's HTTP API (Fiber): it authenticates bearer
// tokens, validates and fingerprints submissions, admits each logical request
// exactly once with one create-only write of the job record, publishes the
// work message, and serves the job's status, changes (long-poll, SSE), result
// links and the API description. It reaches the workers only through JetStream,
// behind the small interfaces it declares (records, workQueue, secretStore,
// resultFiles) that package natsjs implements; it never imports NATS itself.
package gateway
