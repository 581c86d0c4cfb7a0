// What an attempt needs of the worker process that runs it, as interfaces:
// attempt.ts and output.ts depend on these, not on worker.ts, so the
// process (worker.ts) imports the attempt and nothing imports it back.
// Types only.

import type { AbortReason } from "./errors.js";
import type { Caller } from "./rpc.js";
import type { Logger, Outcome } from "./types.js";

/** A running attempt, as the process's drain sees it. */
export interface Attempt {
  abort(reason: AbortReason): void;
}

/** The process an attempt runs in. */
export interface Host {
  /** Sends the attempt's requests under the process's credential. */
  readonly caller: Caller;
  /** The process's longest time between two beats (an assignment may ask for shorter). */
  readonly heartbeatMs: number;
  readonly log: Logger;
  readonly onAttempt: ((type: string, outcome: Outcome, tookMs: number) => void) | undefined;
  /** Set once stop() gave up waiting for attempts: whatever ends now is given back. */
  readonly hard: boolean;
  /** The attempts under way, aborted with "shutdown" when the drain is over. */
  readonly attempts: Set<Attempt>;
}
