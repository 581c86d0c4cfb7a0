// @jobgate/worker: run jobgate job types from Node.js (the worker protocol
// v1, docs/protocol.md; the Go implementation is pkg/worker). The whole
// public API is here; the protocol's subjects, messages and codes stay
// inside the package.

export { Worker } from "./worker.js";
export type {
  ConcurrencyKey,
  Job,
  LogLevel,
  Logger,
  Outcome,
  RateLimit,
  RetryPolicy,
  TypeSpec,
  WorkContext,
  WorkerConfig,
} from "./types.js";
export {
  AbortedError,
  DeclarationError,
  Failure,
  Permanent,
  ResultTooLargeError,
  StoreOutageError,
} from "./errors.js";
export type { AbortReason, DeclarationRefusal, FailureCategory } from "./errors.js";
