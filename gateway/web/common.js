// The helpers the reviewer's page (app.js) and the operator console
// (admin.js) share, loaded before either: pausing, Retry-After, backoff,
// idempotency keys, screen-reader announcements and times.
(() => {
  'use strict';

  // sleep resolves after ms, or at once when signal aborts.
  function sleep(ms, signal) {
    return new Promise((resolve) => {
      if (signal && signal.aborted) return resolve();
      const t = setTimeout(resolve, ms);
      if (signal) signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
    });
  }

  // Retry-After in ms (seconds or an HTTP date), capped at a minute.
  function retryAfterMs(resp, fallback) {
    const v = resp && resp.headers.get('Retry-After');
    if (v) {
      const s = Number(v);
      if (Number.isFinite(s) && s >= 0) return Math.min(s * 1000, 60000);
      const d = Date.parse(v);
      if (!Number.isNaN(d)) return Math.max(0, Math.min(d - Date.now(), 60000));
    }
    return fallback;
  }

  // Exponential backoff with jitter, from 0.5 s to capMs.
  function backoff(attempt, capMs) {
    const base = Math.min(capMs, 1000 * 2 ** attempt);
    return base / 2 + Math.random() * (base / 2);
  }

  // randomUUID needs a secure context (https or localhost); a page opened
  // over plain http on another address still gets a random v4 UUID.
  function newKey() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  // announce says msg in the page's live region (#announce).
  let announceTimer = 0;
  function announce(msg) {
    const el = document.getElementById('announce');
    el.textContent = '';
    clearTimeout(announceTimer);
    // A fresh text node after a tick makes screen readers repeat an equal message.
    announceTimer = setTimeout(() => { el.textContent = msg; }, 50);
  }

  function fmtTime(s) {
    if (!s) return '—';
    const d = new Date(s);
    return Number.isNaN(d.getTime()) ? String(s) : d.toLocaleString();
  }

  window.jobgateCommon = Object.freeze({ sleep, retryAfterMs, backoff, newKey, announce, fmtTime });
})();
