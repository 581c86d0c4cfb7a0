// @jobgate/worker: run jobgate job types from Node.js (the worker protocol
// v1, docs/protocol.md; the Go implementation is pkg/worker).

export { Workers } from "./workers.js";
export type { Job, LogLevel, Logger, Outcome, TypeSpec, WorkContext, WorkersConfig } from "./workers.js";
export { AbortedError, Failure, Permanent, ResultTooLargeError, StoreOutageError } from "./errors.js";
export type { AbortReason, FailureCategory } from "./errors.js";
export { credentialID, inboxPrefix, subject, uploadSubject, WireError, VERSION } from "./wire.js";
export type { Assignment, Declaration, Progress, Reply, StoredResult } from "./wire.js";
