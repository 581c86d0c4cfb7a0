// The result of one attempt, streamed to jobgate through open and up.<host>.<id>.

import { createHash, type Hash } from "node:crypto";
import { Writable } from "node:stream";
import { headers } from "@nats-io/transport-node";

import { ResultTooLargeError, StoreOutageError } from "./errors.js";
import { sleep, jitter } from "./util.js";
import {
  CHUNK_SIZE,
  HEADER_LAST,
  HEADER_SEQ,
  uploadSubject,
  validToken,
  WireError,
  type Held,
  type StoredResult,
  type UploadTarget,
} from "./wire.js";
import { OP_TIMEOUT_MS, transient, unavailable, type Caller } from "./rpc.js";

/** A result up to this size is also kept in memory, to store it again when the store broke the upload off. */
export const KEPT_MAX = 16 << 20;

/**
 * ResultWriter counts, hashes and streams what the handler writes, in
 * chunks of CHUNK_SIZE (the last one shorter, perhaps empty, with
 * Jobgate-Last), each sent once the previous one was answered. It keeps a
 * copy while the output is at most KEPT_MAX.
 */
export class ResultWriter extends Writable {
  /** Bytes accepted and their SHA-256. */
  n = 0;
  private readonly hash: Hash = createHash("sha256");
  /** Set once a write went past the type's limit. */
  tooLarge = false;
  /** jobgate refused the result for lack of room and failed the job itself. */
  refused = false;
  /** What jobgate stored, once the last chunk was answered. */
  stored: StoredResult | null = null;
  /** The streamed upload's end when the store broke it off (the kept copy may be stored again). */
  broken: StoreOutageError | null = null;
  private kept: Buffer[] | null = [];
  private keptLen = 0;
  private pending: Buffer[] = [];
  private pendingLen = 0;
  private target: UploadTarget | null = null;
  private seq = 0;

  constructor(
    private readonly caller: Caller,
    private readonly type: string,
    private readonly held: Held,
    private readonly max: number,
    /** Ends patient requests (the open) of this upload. */
    private readonly deadline: AbortSignal,
  ) {
    super({ highWaterMark: CHUNK_SIZE, decodeStrings: true });
    // An error is the attempt's to classify; without a listener Node would
    // end the process.
    this.on("error", () => {});
  }

  /** The hex SHA-256 of what was written. */
  sum(): string {
    return this.hash.copy().digest("hex");
  }

  /** The copy of the output, if it was kept. */
  keptCopy(): Buffer | null {
    return this.kept ? Buffer.concat(this.kept, this.keptLen) : null;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.take(chunk).then(
      () => cb(),
      (err: Error) => cb(err),
    );
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.finishUpload().then(
      () => cb(),
      (err: Error) => cb(err),
    );
  }

  private async take(chunk: Buffer): Promise<void> {
    if (this.tooLarge || this.n + chunk.length > this.max) {
      this.tooLarge = true;
      throw new ResultTooLargeError(this.max);
    }
    this.n += chunk.length;
    this.hash.update(chunk);
    if (this.kept) {
      if (this.keptLen + chunk.length > KEPT_MAX) {
        this.kept = null;
        this.keptLen = 0;
      } else {
        this.kept.push(chunk);
        this.keptLen += chunk.length;
      }
    }
    if (this.broken) {
      if (!this.kept) throw this.broken;
      return;
    }
    this.pending.push(chunk);
    this.pendingLen += chunk.length;
    while (this.pendingLen >= CHUNK_SIZE) {
      const data = this.takePending(CHUNK_SIZE);
      try {
        await this.send(data, false);
      } catch (err) {
        if (err instanceof StoreOutageError) {
          this.broken = err;
          this.pending = [];
          this.pendingLen = 0;
          if (!this.kept) throw err;
          return;
        }
        throw err;
      }
    }
  }

  private takePending(n: number): Buffer {
    const all = Buffer.concat(this.pending, this.pendingLen);
    const head = all.subarray(0, n);
    const rest = all.subarray(n);
    this.pending = rest.length > 0 ? [rest] : [];
    this.pendingLen = rest.length;
    return head;
  }

  private async finishUpload(): Promise<void> {
    if (this.broken) {
      if (!this.kept) throw this.broken;
      return;
    }
    const data = this.takePending(this.pendingLen);
    try {
      await this.send(data, true);
    } catch (err) {
      if (err instanceof StoreOutageError && this.kept) {
        this.broken = err;
        return;
      }
      throw err;
    }
  }

  /** Opens the upload on first use: one broker answers where the chunks go. */
  private async open(): Promise<UploadTarget> {
    let reply;
    try {
      reply = await this.caller.call(this.type, "open", this.held, { patient: true, signal: this.deadline });
    } catch (err) {
      if (transient(err) || unavailable(err)) {
        throw new StoreOutageError(String(err), { cause: err });
      }
      throw err;
    }
    const u = reply.upload;
    if (!u || !validToken(u.host) || !validToken(u.id)) {
      throw new Error("jobgate answered no upload");
    }
    return u;
  }

  /** Sends one chunk (the last one: answered with what was stored). */
  private async send(data: Buffer, last: boolean): Promise<void> {
    if (!this.target) {
      this.target = await this.open();
      this.seq = 0;
    }
    const h = headers();
    h.set(HEADER_SEQ, String(this.seq));
    if (last) h.set(HEADER_LAST, "1");
    const subj = uploadSubject(this.caller.credential, this.type, this.target.host, this.target.id);
    let reply;
    try {
      reply = await this.caller.request(subj, data, { headers: h, timeoutMs: OP_TIMEOUT_MS });
    } catch (err) {
      if (transient(err) || (err instanceof WireError && err.code === "unavailable")) {
        throw new StoreOutageError(String(err), { cause: err });
      }
      if (err instanceof WireError && err.code === "too_large") {
        this.tooLarge = true;
        this.refused = err.failed;
      }
      throw err;
    }
    this.seq++;
    if (last) {
      if (!reply.stored) {
        throw new Error("jobgate answered the last chunk without the stored result");
      }
      this.stored = reply.stored;
    }
  }

  /**
   * Uploads the kept copy again, from the start with a new open, while the
   * store is unavailable, until the deadline.
   */
  async storeAgain(copy: Buffer): Promise<StoredResult> {
    let delay = 100;
    for (;;) {
      this.target = null;
      this.stored = null;
      try {
        let off = 0;
        for (;;) {
          const end = Math.min(off + CHUNK_SIZE, copy.length);
          const lastChunk = end === copy.length && (end - off < CHUNK_SIZE || off === copy.length);
          await this.send(copy.subarray(off, end), lastChunk);
          off = end;
          if (lastChunk) break;
        }
        return this.stored!;
      } catch (err) {
        if (!(err instanceof StoreOutageError) || this.deadline.aborted) {
          throw err;
        }
      }
      await sleep(jitter(delay), this.deadline);
      delay = Math.min(2 * delay, 2000);
    }
  }
}
