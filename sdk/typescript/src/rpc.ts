// Requests to jobgate's brokers (docs/protocol.md, "Messages"): one request
// and its reply, a refusal as a WireError, tried again when the protocol
// says to.

import {
  PermissionViolationError,
  RequestError,
  TimeoutError,
  type MsgHdrs,
  type NatsConnection,
} from "@nats-io/transport-node";

import { jitter, sleep } from "./util.js";
import { subject, WireError, type Op, type Reply } from "./wire.js";

/** Options of one request. */
export interface CallOptions {
  /** The request's own timeout. Default 10000 ms. */
  timeoutMs?: number;
  /** Try again, jittered, on no responders, timeouts and unavailable/throttled refusals, until signal aborts. */
  patient?: boolean;
  signal?: AbortSignal;
  headers?: MsgHdrs;
}

/** Bounds one request outside a next request's wait. */
export const OP_TIMEOUT_MS = 10_000;

/** Bounds the wait a refusal's retry_after_ms may ask for. */
const MAX_RETRY_AFTER_MS = 3_600_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A transport failure worth trying again (no responders, a timeout, a
 * disconnect); a permissions violation (a credential for other types, an
 * inbox prefix not the credential's) is not.
 */
export function transient(err: unknown): boolean {
  if (err instanceof RequestError) {
    return !(err.cause instanceof PermissionViolationError || /permissions violation/i.test(err.message));
  }
  return err instanceof TimeoutError;
}

/** A refusal that says to try again later. */
export function unavailable(err: unknown): boolean {
  return err instanceof WireError && (err.code === "unavailable" || err.code === "throttled");
}

/** Caller sends one credential's requests over a connection. */
export class Caller {
  constructor(
    readonly nc: NatsConnection,
    readonly credential: string,
  ) {}

  /**
   * Sends one request of op about type and returns its reply; a refusal
   * rejects with a WireError. With patient, no responders, timeouts and
   * unavailable/throttled refusals are tried again, jittered, until signal
   * aborts.
   */
  call(type: string, op: Op, req: unknown, opts: CallOptions = {}): Promise<Reply> {
    return this.request(subject(this.credential, type, op), encoder.encode(JSON.stringify(req)), opts);
  }

  async request(subj: string, data: Uint8Array, opts: CallOptions = {}): Promise<Reply> {
    const nc = this.nc;
    let delay = 100;
    for (;;) {
      let err: unknown;
      try {
        const msg = await nc.request(subj, data, { timeout: opts.timeoutMs ?? OP_TIMEOUT_MS, headers: opts.headers });
        let reply: Reply;
        try {
          reply = JSON.parse(decoder.decode(msg.data)) as Reply;
        } catch (e) {
          throw new Error(`undecodable reply to ${subj}: ${String(e)}`);
        }
        if (reply === null || typeof reply !== "object") {
          throw new Error(`undecodable reply to ${subj}`);
        }
        if (reply.error) {
          const after = Number(reply.error.retry_after_ms);
          throw new WireError(
            String(reply.error.code),
            String(reply.error.message ?? ""),
            reply.canceled === true,
            reply.failed === true,
            Number.isFinite(after) && after > 0 ? Math.min(after, MAX_RETRY_AFTER_MS) : 0,
          );
        }
        return reply;
      } catch (e) {
        err = e;
      }
      if (!opts.patient || !(transient(err) || unavailable(err)) || opts.signal?.aborted || nc.isClosed()) {
        throw err;
      }
      // A refusal that says how long to wait (a declaration past its
      // credential's limit of changes) is asked again after it, not sooner.
      await sleep(Math.max(jitter(delay), err instanceof WireError ? err.retryAfterMs : 0), opts.signal);
      delay = Math.min(2 * delay, 2000);
      if (opts.signal?.aborted) {
        throw err;
      }
    }
  }
}
