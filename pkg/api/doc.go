// Package api holds the types a user of jobgate sees on the wire: the job
// resource and its states, the failure categories, the RFC 9457 problem
// document with its catalogue and sentinel errors, field errors, and a job
// type declaration as a worker writes it. It is the one package every other
// public package (pkg/client, pkg/worker, pkg/workertest) shares; it imports
// only the standard library and holds no behaviour beyond the contract's own
// rules (which moves a state may make, what a key or a type name may be).
// Everything behind these types (the stored record, ids, canonical form,
// codecs) is jobgate's own and may change between releases; this package
// changes only as the contract does.
package api
