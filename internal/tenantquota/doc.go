// Package tenantquota counts each tenant's stored result bytes against a
// per-tenant result quota (JOBGATE_TENANT_RESULTS_MAX_BYTES), so that one
// tenant cannot fill the results' byte budget that every tenant shares.
//
// A Tally is one process's view. Its reading of what is stored comes from
// the result objects themselves (each records its tenant when it is put;
// natsjs.ResultFiles.TenantUse sums their sizes), read again in the
// background every ReadEvery (longer when a reading is slow: at most a
// twentieth of the process's time goes to them), never on a request's
// path. On top of the reading it counts what the process itself does
// since: the bytes of its own uploads under way, reserved chunk by chunk
// as they arrive, and those it stored since the last reading began. So
//
//   - within one process, uploads in flight at once cannot together take a
//     tenant past its quota;
//   - across processes (several dispatchers against one NATS), a tenant can
//     overshoot by what the other processes store for it within one reading
//     interval, plus their uploads in flight: each of them counts it from
//     its next reading on;
//   - a deleted or expired object is freed at the next reading (until then
//     it still counts, which errs on the side of refusing).
//
// No ledger is kept in JetStream: the objects and their retention are the
// truth, a crashed process leaves nothing to reconcile, and an expired
// object (JetStream removes it at JOBGATE_RESULT_TTL without any event) is
// simply absent from the next reading. Memory is one entry per tenant with
// stored results or an upload under way.
package tenantquota
