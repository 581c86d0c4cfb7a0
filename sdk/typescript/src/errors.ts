// What a handler throws, and why its signal aborts.

/**
 * Permanent fails the job now, without further attempts (category
 * handler_error), and its message is shown to the job's owner: say what is
 * wrong with the request, nothing internal. Any other error a handler
 * throws is retried while attempts remain, and its text reaches only the
 * operator; the owner reads a generic message.
 */
export class Permanent extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "Permanent";
  }
}

/**
 * Categories a handler may choose with Failure. "handler_error" and
 * "render_error" are one choice, the handler's own failure: jobgate records
 * it as handler_error for a user's type (render_error is its built-in
 * renderer's; "render_error" is still accepted here for the SDK's earlier
 * users).
 */
export type FailureCategory = "handler_error" | "render_error" | "budget_exceeded" | "internal";

/**
 * Failure is a failure of a chosen category that is retried or not as
 * retryable says; its message is shown to the job's owner (pkg/worker's
 * worker.Fail).
 */
export class Failure extends Error {
  readonly category: FailureCategory;
  readonly retryable: boolean;
  constructor(category: FailureCategory, retryable: boolean, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "Failure";
    this.category = category;
    this.retryable = retryable;
  }
}

/** Thrown by a job's output once the result would exceed the type's maxResultBytes. */
export class ResultTooLargeError extends Error {
  constructor(limit: number) {
    super(`result exceeds the type's size limit of ${limit} bytes`);
    this.name = "ResultTooLargeError";
  }
}

/** Why an attempt's signal aborted. */
export type AbortReason =
  /** the job's owner canceled it */
  | "canceled"
  /** the claim is gone (taken over, finished elsewhere) */
  | "lost"
  /** the attempt's time budget ran out */
  | "timeout"
  /** the worker is stopping and its drain time is over */
  | "shutdown";

/** The reason of an aborted attempt signal (signal.reason). */
export class AbortedError extends Error {
  readonly reason: AbortReason;
  constructor(reason: AbortReason) {
    super(`job attempt aborted: ${reason}`);
    this.name = "AbortedError";
    this.reason = reason;
  }
}

/** The result store was unavailable: the attempt reached no verdict. */
export class StoreOutageError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(`result store unavailable: ${message}`, options);
    this.name = "StoreOutageError";
  }
}

/** Why jobgate refused a type's declaration. */
export type DeclarationRefusal =
  /** the name belongs to another credential's types, or to jobgate's own */
  | "forbidden"
  /** the schema or a limit was refused (the message says which) */
  | "invalid"
  /** any other refusal */
  | "refused";

/** start() rejects with this when jobgate refuses a type's declaration. */
export class DeclarationError extends Error {
  /** The type whose declaration was refused. */
  readonly type: string;
  readonly reason: DeclarationRefusal;
  constructor(type: string, reason: DeclarationRefusal, message: string, options?: ErrorOptions) {
    super(`worker: declare ${type}: ${message}`, options);
    this.name = "DeclarationError";
    this.type = type;
    this.reason = reason;
  }
}
