// Package gateway is jobgate's HTTP API (Fiber). It authenticates bearer
// tokens, validates submissions against the schemas the workers declared
// (a live watch of the declarations, so a new type is accepted without a
// restart), fingerprints them, and admits each logical request exactly once
// with one create-only write of the job record under a key of tenant,
// requester and idempotency key. It does not publish work: the
// dispatcher's relay reads the commit from the record change log and
// publishes the admission's event and the work message
// (gateway.leave_work_to_relay, default true; false makes the gateway
// publish the same work message too, which de-duplication makes harmless).
// A submission's flow fields (run_at or delay, priority, start_by: flow.go)
// are part of its fingerprint; one with a run_at ahead is admitted
// scheduled, with no work, and an admin's run-now (admin_runnow.go) makes
// it queued at once.
// It serves a job's status, the requester's job list (from the
// dispatcher's index), changes (long-poll and SSE, fed by one watch of the
// record bucket per process), cancellation (whose event it publishes),
// result redirects and signed downloads, the declared types (GET /v1/types
// a page of summaries without their schemas, GET /v1/types/{name} one full
// declaration), the reviewer's page, health, metrics and /openapi.yaml. It
// never imports a NATS client: it declares the small interfaces it uses
// (records, workQueue, eventStream, typeSource, secretStore, resultFiles,
// batchRecords, ...), New takes them as Stores, every one required, and
// internal/natsjs implements them (system maps the provisioned
// resources to them).
package gateway
