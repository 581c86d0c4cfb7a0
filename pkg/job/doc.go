// Package job is jobgate's leaf domain package: the job record, its states
// and legal transitions, strict JSON decoding and the RFC 8785 canonical
// form, the canonical request fingerprint, job type declarations and their
// limits, scoped job ids and the sentinel errors every service maps to
// behaviour. It imports only the standard library so that every other
// package can depend on it without dragging in NATS, HTTP or storage.
package job
