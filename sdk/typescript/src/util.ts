// Small helpers: jitter, abortable sleeps, byte-exact clipping.

/** d spread by ±20%, so workers that failed together do not retry together. */
export function jitter(ms: number): number {
  return Math.max(0, ms * (0.8 + 0.4 * Math.random()));
}

/** Resolves after ms, or at once when signal aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** s cut to at most n UTF-8 bytes, never inside a character. */
export function clipBytes(s: string, n: number): string {
  if (Buffer.byteLength(s, "utf8") <= n) {
    return s;
  }
  let out = "";
  let used = 0;
  for (const ch of s) {
    const l = Buffer.byteLength(ch, "utf8");
    if (used + l > n) {
      break;
    }
    out += ch;
    used += l;
  }
  return out;
}

/** s with control characters (which jobgate refuses in user messages and units) turned into spaces. */
export function printable(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\u0000-\u001f\u007f]/g, " ");
}

/** Resolves with true once p settled, or false after ms. */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let t: NodeJS.Timeout | undefined;
  const timer = new Promise<boolean>((r) => (t = setTimeout(() => r(false), ms)));
  try {
    return await Promise.race([p.then(() => true, () => true), timer]);
  } finally {
    clearTimeout(t);
  }
}
