// A registered job type as the process runs it: its declaration, its
// handler and its slots.

import type { Job, WorkContext } from "./types.js";
import { MAX_BUSY, MAX_RUNNING_TENANTS, type Declaration } from "./wire.js";

/** A handler, its params type erased. */
export type Work = (job: Job<unknown>, ctx: WorkContext) => Promise<void> | void;

/** A registered type, its params type erased. */
export class TypeRunner {
  /** Regular slots running a job. */
  busy = 0;
  /** Jobs running here per tenant. */
  readonly running = new Map<string, number>();

  constructor(
    readonly decl: Declaration,
    readonly concurrency: number,
    readonly work: Work,
  ) {}

  started(tenant: string): void {
    this.running.set(tenant, (this.running.get(tenant) ?? 0) + 1);
  }

  ended(tenant: string): void {
    const n = (this.running.get(tenant) ?? 1) - 1;
    if (n <= 0) {
      this.running.delete(tenant);
    } else {
      this.running.set(tenant, n);
    }
  }

  /** The type's jobs running here, in regular and newcomer slots (hello's busy). */
  runningJobs(): number {
    let n = 0;
    for (const c of this.running.values()) n += c;
    return Math.min(n, MAX_BUSY);
  }

  /** The tenants a newcomer slot must leave out, or null while a regular slot is free. */
  newcomerRequest(): string[] | null {
    if (this.busy < this.concurrency) {
      return null;
    }
    return [...this.running.keys()].slice(0, MAX_RUNNING_TENANTS);
  }
}
