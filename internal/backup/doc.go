// Package backup copies a deployment's JetStream state and its data dir's
// secrets to a directory, and back into an empty deployment (jobgate backup
// and restore; docs/operations.md, "Backup and restore").
//
// Each stream (every bucket, object store and stream whose name holds
// JOBGATE_) is copied with JetStream's own snapshot (its messages, their
// sequences and times, the stream's consumers), so a restore puts back the
// same records at the same revisions, the same idempotency keys, the
// durable consumers' positions. The streams are copied one after another,
// in an order where what a record refers to is copied after it (a job's
// result after the job, a batch's jobs after the batch), and what was
// admitted between two copies is recovered by the restored deployment as
// after a crash (the relay and the sweeper). A manifest, written last,
// lists every file with its size and SHA-256: restore checks them all
// before it writes anything, and refuses a target that is not empty.
package backup
