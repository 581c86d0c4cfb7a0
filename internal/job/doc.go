// Package job is jobgate's domain package: the stored job record and its
// lifecycle (which changes each component may make, as compare-and-set
// writes), scoped job ids and key hashes, store keys, the submission decoder
// and its fingerprint (with a submission's flow fields: flow.go), type
// declarations as stored, and the flow keys a type's flow control takes for
// a job (FlowKeys). The record's JSON codecs are internal/codec's, the map
// from errors to problem documents the gateway's. The contract's own types
// (states, the resource, failures, problems and their sentinels) are
// pkg/api's, known here under the same names. It is internal: users see
// pkg/api.
package job
