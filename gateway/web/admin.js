// The operator console (/admin): stats per type, the jobs with the filters
// of GET /v1/admin/jobs, one job with its attempts, cancel and retry, bulk
// cancel and retry of a filter (a dry run first), the job types (pause,
// resume, delete) and the live workers. It uses only the admin API.
//
// Storage: sessionStorage jobgate.console.token holds the bearer token (this
// tab only, kept across reloads, gone when the tab closes); it is sent only
// in the Authorization header and never put in a URL or in local storage.
// The view and its filter live in the URL fragment (#view=jobs&state=failed),
// which a browser never sends to the server, so a reload or a shared link
// finds the same view.
//
// Every string from the API is hostile: the page builds its DOM with
// createElement and textContent only, never by parsing markup.
(() => {
  'use strict';

  const TOKEN_KEY = 'jobgate.console.token';
  const FORBIDDEN = 'This token is not an admin or operator token.';
  const STATS_EVERY_MS = 10000;
  const DETAIL_EVERY_MS = 3000;
  const SEND_ATTEMPTS = 6; // an action is sent at most this often (network errors, 429, 503)
  const FILTERS = ['tenant', 'requester', 'type', 'state', 'category', 'created_after', 'created_before'];
  const STATES = new Set(['queued', 'running', 'succeeded', 'failed', 'canceled']);
  const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);

  const $ = (id) => document.getElementById(id);

  let session = null; // {token, sub, tenant, admin, operator, exp}
  let view = null; // the route shown: {name, params}
  let statsTimer = 0;
  let statsFails = 0;
  let detailTimer = 0;
  let expiryTimer = 0;
  let listGen = 0; // a newer load of the list makes an older answer moot
  let detailGen = 0;
  let bulk = null; // the bulk action being confirmed: {action, filter, key}
  let bulkFilter = null; // the filter the bulk area speaks of
  let typesCursor = '';
  let workersCursor = '';

  class AuthError extends Error {}

  // ---------------------------------------------------------------- helpers

  function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

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

  // Exponential backoff with jitter, 0.5 s to 60 s.
  function backoff(attempt) {
    const base = Math.min(60000, 1000 * 2 ** attempt);
    return base / 2 + Math.random() * (base / 2);
  }

  function newKey() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  let announceTimer = 0;
  function announce(msg) {
    const el = $('announce');
    el.textContent = '';
    clearTimeout(announceTimer);
    announceTimer = setTimeout(() => { el.textContent = msg; }, 50);
  }

  function fmtTime(s) {
    if (!s) return '—';
    const d = new Date(s);
    return Number.isNaN(d.getTime()) ? String(s) : d.toLocaleString();
  }

  function setTime(el, s) {
    el.textContent = fmtTime(s);
    if (s) el.setAttribute('datetime', String(s)); else el.removeAttribute('datetime');
  }

  function fmtAge(seconds) {
    const s = Math.round(Number(seconds) || 0);
    if (s <= 0) return '—';
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  // el makes an element with text (never markup) and attributes.
  function el(tag, text, attrs) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  function cell(row, content) {
    const td = document.createElement('td');
    if (content instanceof Node) td.append(content); else td.textContent = content === undefined || content === null ? '' : String(content);
    row.append(td);
    return td;
  }

  function badge(state) {
    const b = el('span', state, { class: 'badge' });
    if (STATES.has(state)) b.classList.add(`state-${state}`);
    return b;
  }

  // jobLink is a link to a job's detail; the id only ever goes into the
  // fragment, encoded.
  function jobLink(id) {
    const a = el('a', id, { class: 'mono' });
    a.href = `#${new URLSearchParams({ view: 'job', id: String(id) })}`;
    return a;
  }

  // ---------------------------------------------------------------- API

  async function api(path, init = {}) {
    if (!session) throw new AuthError('signed out');
    const headers = new Headers(init.headers || {});
    headers.set('Authorization', `Bearer ${session.token}`);
    const resp = await fetch(path, { ...init, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' });
    if (resp.status === 401) {
      expire('Your sign-in has expired or was rejected. Sign in again.');
      throw new AuthError('unauthorized');
    }
    return resp;
  }

  // send is api for an action: a network error, 429 or 503 is sent again,
  // the same request with the same headers (so the same Idempotency-Key),
  // after Retry-After or a backoff, a few times.
  async function send(path, init, onWait) {
    let last = null;
    for (let attempt = 0; attempt < SEND_ATTEMPTS; attempt++) {
      let resp = null;
      try {
        resp = await api(path, init);
      } catch (e) {
        if (e instanceof AuthError) throw e;
        last = e;
      }
      if (resp && resp.status !== 429 && resp.status !== 503) return resp;
      if (resp) last = resp;
      if (attempt + 1 < SEND_ATTEMPTS) {
        const wait = retryAfterMs(resp, backoff(attempt));
        if (onWait) onWait(wait);
        await sleep(wait);
      }
    }
    if (last instanceof Response) return last;
    throw last || new Error('not sent');
  }

  async function problemText(resp) {
    let p = null;
    try { p = await resp.json(); } catch { /* not JSON */ }
    if (resp.status === 403 && (!p || !p.detail)) return FORBIDDEN;
    const title = p && typeof p.title === 'string' ? p.title : `HTTP ${resp.status}`;
    const detail = p && typeof p.detail === 'string' ? p.detail : '';
    let text = detail ? `${title}: ${detail}` : title;
    if (p && Array.isArray(p.errors)) {
      text += ` (${p.errors.map((e) => `${e && e.field}: ${e && e.message}`).join('; ')})`;
    }
    return text;
  }

  // ---------------------------------------------------------------- session

  // parseToken reads a token's claims for display only (who, which role):
  // the server checks the signature and decides what the token reaches.
  function parseToken(token) {
    const parts = token.split('.');
    if (parts.length !== 3) return null;
    try {
      let b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
      while (b64.length % 4) b64 += '=';
      const c = JSON.parse(atob(b64));
      if (!c || typeof c !== 'object' || typeof c.sub !== 'string') return null;
      return {
        token, sub: c.sub, tenant: typeof c.tenant === 'string' ? c.tenant : '',
        admin: c.admin === true, operator: c.operator === true,
        exp: typeof c.exp === 'number' ? c.exp * 1000 : Infinity,
      };
    } catch {
      return null;
    }
  }

  function showSignin(message) {
    $('app').hidden = true;
    $('nav').hidden = true;
    $('whoami').hidden = true;
    $('signin').hidden = false;
    $('signin-error').textContent = message || '';
    $('token').value = '';
    $('token').focus();
  }

  // A token is taken once the admin API accepts it: a 403 is a token that
  // is valid but carries neither role.
  async function signIn(token) {
    const s = parseToken(token.trim());
    $('signin-error').textContent = '';
    if (!s) {
      $('signin-error').textContent = 'That is not a jobgate token (a JWT with a sub claim).';
      return;
    }
    if (s.exp <= Date.now()) {
      $('signin-error').textContent = 'That token has expired.';
      return;
    }
    session = s;
    $('signin-button').disabled = true;
    try {
      const resp = await send('/v1/admin/stats', {});
      if (resp.status === 403) {
        session = null;
        $('signin-error').textContent = FORBIDDEN;
        announce(FORBIDDEN);
        return;
      }
      if (!resp.ok) {
        session = null;
        $('signin-error').textContent = await problemText(resp);
        return;
      }
    } catch (e) {
      if (!(e instanceof AuthError)) {
        session = null;
        $('signin-error').textContent = 'The server could not be reached. Try again.';
      }
      return;
    } finally {
      $('signin-button').disabled = false;
    }
    sessionStorage.setItem(TOKEN_KEY, s.token);
    enter();
  }

  function enter() {
    $('signin').hidden = true;
    $('app').hidden = false;
    $('whoami').hidden = false;
    $('nav').hidden = false;
    const role = session.operator ? 'operator' : (session.admin ? `admin of tenant ${session.tenant}` : `tenant ${session.tenant}`);
    $('who').textContent = `${session.sub} · ${role}` +
      (Number.isFinite(session.exp) ? ` · until ${new Date(session.exp).toLocaleTimeString()}` : '');
    $('nav-types').hidden = !session.operator;
    $('nav-workers').hidden = !session.operator;
    $('f-tenant-field').hidden = !session.operator;
    clearTimeout(expiryTimer);
    if (Number.isFinite(session.exp)) {
      expiryTimer = setTimeout(() => expire('Your sign-in has expired. Sign in again.'),
        Math.min(session.exp - Date.now(), 2 ** 31 - 1));
    }
    route();
  }

  function stopTimers() {
    clearTimeout(statsTimer);
    clearTimeout(detailTimer);
    statsTimer = 0;
    detailTimer = 0;
  }

  function clearData() {
    for (const id of ['stats-body', 'jobs-body', 'attempts-body', 'types-body', 'workers-body']) $(id).replaceChildren();
    for (const id of ['stats-status', 'jobs-error', 'bulk-status', 'd-status', 'types-status', 'types-error',
      'workers-error', 'app-error', 'd-error-message', 'd-params']) $(id).textContent = '';
    $('bulk-confirm').hidden = true;
    bulk = null;
    bulkFilter = null;
  }

  function expire(message) {
    stopTimers();
    clearTimeout(expiryTimer);
    session = null;
    view = null;
    listGen++;
    detailGen++;
    sessionStorage.removeItem(TOKEN_KEY);
    clearData();
    showSignin(message);
    announce(message);
  }

  // ---------------------------------------------------------------- routes

  function hashParams() {
    return new URLSearchParams(location.hash.replace(/^#/, ''));
  }

  function go(params) {
    const next = `#${params}`;
    if (location.hash === next) route(); else location.hash = next;
  }

  function route() {
    if (!session) return;
    const p = hashParams();
    let name = p.get('view') || 'jobs';
    if (!['jobs', 'job', 'types', 'workers'].includes(name)) name = 'jobs';
    view = { name, params: p };
    stopTimers();
    $('app-error').textContent = '';
    for (const v of ['jobs', 'job', 'types', 'workers']) $(`view-${v}`).hidden = v !== name;
    for (const [link, v] of [['nav-jobs', 'jobs'], ['nav-types', 'types'], ['nav-workers', 'workers']]) {
      if (v === name || (v === 'jobs' && name === 'job')) $(link).setAttribute('aria-current', 'page');
      else $(link).removeAttribute('aria-current');
    }
    if (name === 'jobs') showJobs(p);
    else if (name === 'job') showJob(p.get('id') || '');
    else if (name === 'types') { typesCursor = ''; loadTypes(false); }
    else if (name === 'workers') { workersCursor = ''; loadWorkers(false); }
  }

  // ---------------------------------------------------------------- jobs view

  // The filter of the jobs view, from the fragment.
  function filterOf(p) {
    const f = {};
    for (const k of FILTERS) {
      const v = p.get(k);
      if (v) f[k] = v;
    }
    if (!session.operator) delete f.tenant;
    return f;
  }

  function hasFilter(f) { return Object.keys(f).length > 0; }

  // datetime-local shows local time without a zone; the API wants RFC 3339.
  function toLocalInput(iso) {
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return '';
    const z = (n) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${z(d.getMonth() + 1)}-${z(d.getDate())}T${z(d.getHours())}:${z(d.getMinutes())}:${z(d.getSeconds())}`;
  }

  function fromLocalInput(v) {
    if (!v) return '';
    const d = new Date(v);
    return Number.isNaN(d.getTime()) ? '' : d.toISOString();
  }

  function fillForm(f) {
    $('f-tenant').value = f.tenant || '';
    $('f-requester').value = f.requester || '';
    $('f-type').value = f.type || '';
    $('f-state').value = f.state || '';
    $('f-category').value = f.category || '';
    $('f-after').value = f.created_after ? toLocalInput(f.created_after) : '';
    $('f-before').value = f.created_before ? toLocalInput(f.created_before) : '';
  }

  function formFilter() {
    const f = {
      tenant: session.operator ? $('f-tenant').value.trim() : '',
      requester: $('f-requester').value.trim(),
      type: $('f-type').value.trim(),
      state: $('f-state').value,
      category: $('f-category').value,
      created_after: fromLocalInput($('f-after').value),
      created_before: fromLocalInput($('f-before').value),
    };
    for (const k of Object.keys(f)) if (!f[k]) delete f[k];
    return f;
  }

  function jobsParams(f, cursor) {
    const p = new URLSearchParams({ view: 'jobs' });
    for (const k of FILTERS) if (f[k]) p.set(k, f[k]);
    if (cursor) p.set('cursor', cursor);
    return p;
  }

  function showJobs(p) {
    const f = filterOf(p);
    fillForm(f);
    const filtered = hasFilter(f);
    $('bulk-cancel').disabled = !filtered;
    $('bulk-retry').disabled = !filtered;
    $('bulk-hint').hidden = filtered;
    if (JSON.stringify(bulkFilter) !== JSON.stringify(f)) {
      // A question or an outcome is about the filter it was asked for.
      bulk = null;
      bulkFilter = f;
      $('bulk-confirm').hidden = true;
      $('bulk-status').textContent = '';
    }
    statsFails = 0;
    pollStats();
    loadJobs(f, p.get('cursor') || '');
  }

  async function loadJobs(f, cursor) {
    const gen = ++listGen;
    const q = new URLSearchParams();
    for (const k of FILTERS) if (f[k]) q.set(k, f[k]);
    q.set('limit', '50');
    if (cursor) q.set('cursor', cursor);
    $('jobs-error').textContent = '';
    $('jobs').setAttribute('aria-busy', 'true');
    let resp;
    try {
      resp = await send(`/v1/admin/jobs?${q}`, {}, (ms) => {
        if (gen === listGen) $('jobs-error').textContent = `The server is busy; trying again in ${Math.ceil(ms / 1000)} s…`;
      });
    } catch (e) {
      if (!(e instanceof AuthError) && gen === listGen) $('jobs-error').textContent = 'The server could not be reached. Refresh to try again.';
      return;
    }
    if (gen !== listGen) return;
    $('jobs').removeAttribute('aria-busy');
    if (!resp.ok) {
      $('jobs-error').textContent = await problemText(resp);
      $('jobs-body').replaceChildren();
      $('jobs').dataset.count = '0';
      return;
    }
    const page = await resp.json();
    if (gen !== listGen) return;
    const jobs = Array.isArray(page.jobs) ? page.jobs : [];
    const rows = jobs.map((j) => {
      const tr = el('tr', null, { 'data-job-id': String(j.id) });
      tr.dataset.state = String(j.state);
      cell(tr, jobLink(j.id));
      cell(tr, j.type);
      cell(tr, badge(j.state));
      cell(tr, j.tenant);
      cell(tr, j.requester);
      const t = el('time');
      setTime(t, j.created_at);
      cell(tr, t);
      cell(tr, j.attempt);
      cell(tr, j.error ? j.error.category : '');
      return tr;
    });
    $('jobs-body').replaceChildren(...rows);
    $('jobs').dataset.count = String(rows.length);
    $('jobs-empty').hidden = rows.length > 0;
    const next = typeof page.next_cursor === 'string' ? page.next_cursor : '';
    $('page-next').disabled = !next;
    $('page-next').dataset.cursor = next;
    $('page-first').disabled = !cursor;
  }

  // ---------------------------------------------------------------- stats

  // pollStats reads the counts now and again every STATS_EVERY_MS while the
  // jobs view is shown and the tab visible; a 429 or 503 waits as long as
  // Retry-After says (or backs off), and so does a network error.
  async function pollStats() {
    clearTimeout(statsTimer);
    statsTimer = 0;
    if (!session || !view || view.name !== 'jobs' || document.visibilityState === 'hidden') return;
    const f = filterOf(view.params);
    const q = f.tenant ? `?${new URLSearchParams({ tenant: f.tenant })}` : '';
    let wait = STATS_EVERY_MS;
    try {
      const resp = await api(`/v1/admin/stats${q}`);
      if (resp.ok) {
        statsFails = 0;
        renderStats(await resp.json());
      } else if (resp.status === 429 || resp.status === 503) {
        wait = Math.max(STATS_EVERY_MS, retryAfterMs(resp, backoff(++statsFails)));
        $('stats-status').textContent = `The server is busy; next look in ${Math.ceil(wait / 1000)} s.`;
      } else {
        $('stats-status').textContent = await problemText(resp);
        wait = Math.max(STATS_EVERY_MS, backoff(++statsFails));
      }
    } catch (e) {
      if (e instanceof AuthError) return;
      wait = Math.max(STATS_EVERY_MS, backoff(++statsFails));
      $('stats-status').textContent = 'The server could not be reached; trying again.';
    }
    if (session && view && view.name === 'jobs' && document.visibilityState !== 'hidden') {
      clearTimeout(statsTimer);
      statsTimer = setTimeout(pollStats, wait);
    }
  }

  function renderStats(s) {
    const types = Array.isArray(s.types) ? s.types : [];
    const rows = types.map((t) => {
      const tr = el('tr', null, { 'data-type': String(t.type) });
      const th = el('th', t.type, { scope: 'row' });
      tr.append(th);
      const n = (v) => (Number.isFinite(v) ? v : 0);
      for (const [k, v] of [['queued', t.queued], ['running', t.running], ['retrying', t.retrying]]) {
        cell(tr, n(v)).dataset.k = k;
      }
      cell(tr, fmtAge(t.oldest_queued_seconds)).dataset.k = 'oldest';
      for (const [w, win] of [['hour', t.last_hour], ['day', t.last_day]]) {
        for (const k of ['succeeded', 'failed', 'canceled']) cell(tr, n(win && win[k])).dataset.k = `${w}-${k}`;
      }
      return tr;
    });
    if (rows.length === 0) {
      const tr = el('tr');
      cell(tr, 'No jobs counted yet.').colSpan = 11;
      rows.push(tr);
    }
    $('stats-body').replaceChildren(...rows);
    $('stats-status').textContent = `Updated ${new Date().toLocaleTimeString()}`;
  }

  // ---------------------------------------------------------------- bulk

  function jobs(n) { return `${n} ${n === 1 ? 'job' : 'jobs'}`; }

  function describe(f) {
    return Object.entries(f).map(([k, v]) => `${k} ${v}`).join(', ');
  }

  function bulkBody(b, extra) {
    const body = {};
    for (const k of FILTERS) if (b.filter[k]) body[k] = b.filter[k];
    return JSON.stringify({ ...body, ...extra });
  }

  // startBulk counts, by a dry run, what the action would do to every job
  // of the filter, and asks to confirm that.
  async function startBulk(action) {
    const f = filterOf(view.params);
    if (!hasFilter(f)) return;
    bulk = { action, filter: f, key: '' };
    $('bulk-confirm').hidden = true;
    $('bulk-status').textContent = 'Counting…';
    $('bulk-cancel').disabled = true;
    $('bulk-retry').disabled = true;
    try {
      const resp = await send(`/v1/admin/jobs/${action}`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: bulkBody(bulk, { dry_run: true }),
      });
      if (!resp.ok) {
        $('bulk-status').textContent = await problemText(resp);
        bulk = null;
        return;
      }
      const r = await resp.json();
      const n = action === 'cancel' ? r.canceled : r.retried;
      const more = r.truncated ? ` (it counted the first ${r.matched} only)` : '';
      const verb = action === 'cancel' ? 'Cancel' : 'Retry';
      $('bulk-question').textContent = `${verb} ${n} of the ${jobs(r.matched)} matching ${describe(f)}${more}? ` +
        `${r.skipped} would be left as they are.`;
      $('bulk-go').textContent = `${verb} ${jobs(n)}`;
      $('bulk-go').disabled = n === 0;
      $('bulk-confirm').hidden = false;
      $('bulk-confirm').dataset.action = action;
      $('bulk-confirm').dataset.count = String(n);
      $('bulk-status').textContent = '';
      $('bulk-go').focus();
    } catch (e) {
      if (!(e instanceof AuthError)) $('bulk-status').textContent = 'The server could not be reached. Try again.';
      bulk = null;
    } finally {
      $('bulk-cancel').disabled = false;
      $('bulk-retry').disabled = false;
    }
  }

  // runBulk does it: one Idempotency-Key for this confirmation, used by
  // every call (a resend, or the next part after a truncated answer).
  async function runBulk() {
    if (!bulk) return;
    const b = bulk;
    b.key = b.key || newKey();
    $('bulk-go').disabled = true;
    $('bulk-back').disabled = true;
    const total = { canceled: 0, retried: 0, replayed: 0, skipped: 0, failed: 0 };
    let cursor = '';
    let stopped = '';
    try {
      for (let part = 0; part < 100; part++) {
        const headers = { 'Content-Type': 'application/json' };
        if (b.action === 'retry') headers['Idempotency-Key'] = b.key;
        const resp = await send(`/v1/admin/jobs/${b.action}`, {
          method: 'POST', headers, body: bulkBody(b, cursor ? { cursor } : {}),
        }, (ms) => { $('bulk-status').textContent = `The server is busy; going on in ${Math.ceil(ms / 1000)} s…`; });
        if (!resp.ok) {
          stopped = await problemText(resp);
          break;
        }
        const r = await resp.json();
        for (const k of Object.keys(total)) total[k] += Number(r[k]) || 0;
        if (!r.truncated || !r.next_cursor || r.truncated === 'shutdown') {
          if (r.truncated === 'shutdown') stopped = 'The gateway is stopping; run it again to finish.';
          break;
        }
        cursor = r.next_cursor;
        $('bulk-status').textContent = `Working… ${total.canceled + total.retried} so far`;
      }
    } catch (e) {
      if (e instanceof AuthError) return;
      stopped = 'The server could not be reached; confirm again to finish (nothing is done twice).';
    } finally {
      $('bulk-go').disabled = false;
      $('bulk-back').disabled = false;
    }
    const done = b.action === 'cancel' ? `Canceled ${jobs(total.canceled)}` :
      `Retried ${jobs(total.retried)}${total.replayed ? ` (${total.replayed} already retried by this action)` : ''}`;
    const msg = `${done}; ${total.skipped} left as they were${total.failed ? `, ${total.failed} could not be changed (confirm again to finish)` : ''}.` +
      (stopped ? ` ${stopped}` : '');
    $('bulk-status').textContent = msg;
    announce(msg);
    if (!stopped && !total.failed) {
      bulk = null;
      $('bulk-confirm').hidden = true;
    }
    if (view && view.name === 'jobs') {
      loadJobs(filterOf(view.params), view.params.get('cursor') || '');
      statsFails = 0;
      pollStats();
    }
  }

  // ---------------------------------------------------------------- one job

  function showJob(id) {
    $('d-status').textContent = '';
    renderJob(null);
    loadJob(id);
  }

  async function loadJob(id) {
    clearTimeout(detailTimer);
    const gen = ++detailGen;
    let wait = DETAIL_EVERY_MS;
    let j = null;
    try {
      const resp = await api(`/v1/admin/jobs/${encodeURIComponent(id)}`);
      if (gen !== detailGen) return;
      if (resp.ok) {
        j = await resp.json();
        if (gen !== detailGen) return;
        renderJob(j);
      } else if (resp.status === 429 || resp.status === 503) {
        wait = retryAfterMs(resp, backoff(2));
      } else if (resp.status === 404) {
        $('d-status').textContent = 'No job of that id is visible to this sign-in.';
        return;
      } else {
        $('d-status').textContent = await problemText(resp);
        return;
      }
    } catch (e) {
      if (e instanceof AuthError) return;
      wait = backoff(2);
    }
    if (j && TERMINAL.has(j.state)) return;
    if (session && view && view.name === 'job' && view.params.get('id') === id && document.visibilityState !== 'hidden') {
      detailTimer = setTimeout(() => loadJob(id), wait);
    }
  }

  function renderJob(j) {
    const v = $('view-job');
    if (!j) {
      delete v.dataset.jobId;
      delete v.dataset.state;
      for (const id of ['d-id', 'd-state', 'd-type', 'd-tenant', 'd-requester', 'd-attempt', 'd-params', 'd-error-message']) $(id).textContent = '';
      $('d-retry-of').replaceChildren();
      $('d-retried-as').replaceChildren();
      $('attempts-body').replaceChildren();
      $('d-error').hidden = true;
      $('d-cancel').disabled = true;
      $('d-retry').disabled = true;
      return;
    }
    v.dataset.jobId = String(j.id);
    v.dataset.state = String(j.state);
    $('d-id').textContent = j.id;
    const b = badge(j.state);
    $('d-state').replaceWith(b);
    b.id = 'd-state';
    $('d-type').textContent = j.type;
    $('d-tenant').textContent = j.tenant;
    $('d-requester').textContent = j.requester;
    $('d-attempt').textContent = j.attempt;
    setTime($('d-created'), j.created_at);
    setTime($('d-started'), j.started_at);
    setTime($('d-finished'), j.finished_at);
    setTime($('d-retry-at'), j.retry_at);
    $('d-retry-of').replaceChildren(j.retry_of ? jobLink(j.retry_of) : '—');
    $('d-retried-as').replaceChildren(j.retried_as ? jobLink(j.retried_as) : '—');
    $('d-error').hidden = !j.error;
    $('d-error-category').textContent = j.error ? j.error.category : '';
    $('d-error-message').textContent = j.error ? j.error.message : '';
    let params = '';
    try { params = JSON.stringify(j.params, null, 2); } catch { params = String(j.params); }
    $('d-params').textContent = params;
    $('d-cancel').disabled = TERMINAL.has(j.state);
    $('d-retry').disabled = j.state !== 'failed' && j.state !== 'canceled';
    const attempts = Array.isArray(j.attempts) ? j.attempts : [];
    $('attempts-body').replaceChildren(...attempts.map((a) => {
      const tr = el('tr', null, { 'data-attempt': String(a.attempt) });
      cell(tr, a.attempt);
      cell(tr, a.worker).classList.add('mono');
      const s = el('time');
      setTime(s, a.started_at);
      cell(tr, s);
      const e = el('time');
      setTime(e, a.ended_at);
      cell(tr, e);
      cell(tr, a.outcome || 'running');
      const err = document.createElement('td');
      if (a.error) {
        err.append(el('strong', a.error.category), el('pre', a.error.message, { class: 'message' }));
      }
      tr.append(err);
      return tr;
    }));
    $('attempts-empty').hidden = attempts.length > 0;
  }

  async function cancelJob() {
    const id = $('view-job').dataset.jobId;
    if (!id) return;
    $('d-cancel').disabled = true;
    $('d-status').textContent = 'Canceling…';
    try {
      const resp = await send(`/v1/admin/jobs/${encodeURIComponent(id)}/cancel`, { method: 'POST' });
      if (resp.ok) {
        const j = await resp.json();
        if ($('view-job').dataset.jobId === id) renderJob(j);
        $('d-status').textContent = `Canceled ${id}.`;
        announce(`Canceled ${id}.`);
      } else {
        $('d-status').textContent = await problemText(resp);
        loadJob(id);
      }
    } catch (e) {
      if (!(e instanceof AuthError)) $('d-status').textContent = 'The server could not be reached. Try again.';
      $('d-cancel').disabled = false;
    }
  }

  // retryJob makes the job's retry: one Idempotency-Key per click, the
  // same on every resend of that request, so a lost answer makes no second
  // job.
  async function retryJob() {
    const id = $('view-job').dataset.jobId;
    if (!id) return;
    const key = newKey();
    $('d-retry').disabled = true;
    $('d-status').textContent = 'Retrying…';
    try {
      const resp = await send(`/v1/admin/jobs/${encodeURIComponent(id)}/retry`, { method: 'POST', headers: { 'Idempotency-Key': key } },
        (ms) => { $('d-status').textContent = `The server is busy; trying again in ${Math.ceil(ms / 1000)} s…`; });
      if (resp.ok) {
        const j = await resp.json();
        const msg = document.createDocumentFragment();
        msg.append('Retried as ', jobLink(j.id), '.');
        $('d-status').replaceChildren(msg);
        announce(`Retried as ${j.id}.`);
        if ($('view-job').dataset.jobId === id) loadJob(id);
      } else {
        $('d-status').textContent = await problemText(resp);
        $('d-retry').disabled = false;
      }
    } catch (e) {
      if (!(e instanceof AuthError)) $('d-status').textContent = 'The server could not be reached. Try again.';
      $('d-retry').disabled = false;
    }
  }

  // ---------------------------------------------------------------- types

  async function loadTypes(more) {
    const q = new URLSearchParams({ limit: '100' });
    if (more && typesCursor) q.set('cursor', typesCursor);
    $('types-error').textContent = '';
    try {
      const resp = await send(`/v1/types?${q}`, {});
      if (!resp.ok) {
        $('types-error').textContent = await problemText(resp);
        return;
      }
      const page = await resp.json();
      const rows = (Array.isArray(page.types) ? page.types : []).map(typeRow);
      if (more) $('types-body').append(...rows); else $('types-body').replaceChildren(...rows);
      typesCursor = typeof page.next_cursor === 'string' ? page.next_cursor : '';
      $('types-more').hidden = !typesCursor;
    } catch (e) {
      if (!(e instanceof AuthError)) $('types-error').textContent = 'The server could not be reached. Refresh to try again.';
    }
  }

  function typeRow(t) {
    const name = String(t.name);
    const tr = el('tr', null, { 'data-type': name });
    tr.dataset.paused = String(t.paused === true);
    tr.append(el('th', name, { scope: 'row' }));
    cell(tr, t.workers);
    cell(tr, t.attempts);
    cell(tr, Number.isFinite(t.timeout_seconds) ? `${t.timeout_seconds} s` : '');
    const d = el('time');
    setTime(d, t.declared_at);
    cell(tr, d);
    cell(tr, t.paused ? 'paused' : 'no').dataset.k = 'paused';
    const actions = cell(tr, '');
    typeActions(tr, actions, name, t.paused === true);
    return tr;
  }

  function typeActions(tr, td, name, paused) {
    const toggle = el('button', paused ? 'Resume' : 'Pause', { type: 'button', class: 'quiet', 'data-act': paused ? 'resume' : 'pause' });
    toggle.setAttribute('aria-label', `${paused ? 'Resume' : 'Pause'} ${name}`);
    toggle.addEventListener('click', () => pauseType(tr, td, name, !paused));
    const del = el('button', 'Delete…', { type: 'button', class: 'quiet danger', 'data-act': 'delete' });
    del.setAttribute('aria-label', `Delete ${name}`);
    del.addEventListener('click', () => {
      const yes = el('button', `Delete ${name}`, { type: 'button', class: 'danger', 'data-act': 'delete-confirm' });
      const no = el('button', 'Keep', { type: 'button', class: 'quiet' });
      yes.addEventListener('click', () => deleteType(tr, td, name, paused));
      no.addEventListener('click', () => typeActions(tr, td, name, paused));
      td.replaceChildren(yes, no);
      yes.focus();
    });
    td.replaceChildren(toggle, del);
  }

  async function pauseType(tr, td, name, pause) {
    for (const b of td.querySelectorAll('button')) b.disabled = true;
    $('types-status').textContent = '';
    try {
      const resp = await send(`/v1/admin/types/${encodeURIComponent(name)}/${pause ? 'pause' : 'resume'}`, { method: 'POST' });
      if (!resp.ok) {
        $('types-error').textContent = await problemText(resp);
        typeActions(tr, td, name, !pause);
        return;
      }
      const s = await resp.json();
      const paused = s.paused === true;
      tr.dataset.paused = String(paused);
      tr.querySelector('[data-k=paused]').textContent = paused ? 'paused' : 'no';
      typeActions(tr, td, name, paused);
      const msg = paused ? `${name} is paused: its jobs are admitted and wait queued.` : `${name} is resumed.`;
      $('types-status').textContent = msg;
      announce(msg);
    } catch (e) {
      if (!(e instanceof AuthError)) $('types-error').textContent = 'The server could not be reached. Try again.';
      typeActions(tr, td, name, !pause);
    }
  }

  async function deleteType(tr, td, name, paused) {
    for (const b of td.querySelectorAll('button')) b.disabled = true;
    try {
      const resp = await send(`/v1/admin/types/${encodeURIComponent(name)}`, { method: 'DELETE' });
      if (resp.status === 204 || resp.status === 404) {
        tr.remove();
        $('types-status').textContent = `${name} is deleted.`;
        announce(`${name} is deleted.`);
        return;
      }
      $('types-error').textContent = await problemText(resp);
    } catch (e) {
      if (!(e instanceof AuthError)) $('types-error').textContent = 'The server could not be reached. Try again.';
    }
    typeActions(tr, td, name, paused);
  }

  // ---------------------------------------------------------------- workers

  async function loadWorkers(more) {
    const q = new URLSearchParams({ limit: '100' });
    if (more && workersCursor) q.set('cursor', workersCursor);
    $('workers-error').textContent = '';
    try {
      const resp = await send(`/v1/admin/workers?${q}`, {});
      if (!resp.ok) {
        $('workers-error').textContent = await problemText(resp);
        return;
      }
      const page = await resp.json();
      const rows = (Array.isArray(page.workers) ? page.workers : []).map((w) => {
        const tr = el('tr', null, { 'data-worker': String(w.worker) });
        cell(tr, w.credential).classList.add('mono');
        cell(tr, w.worker).classList.add('mono');
        const types = (Array.isArray(w.types) ? w.types : [])
          .map((t) => `${t.type} (${t.busy === null || t.busy === undefined ? '?' : t.busy} / ${t.slots})`).join(', ');
        cell(tr, types);
        cell(tr, w.busy === null || w.busy === undefined ? 'unknown' : w.busy);
        cell(tr, w.slots);
        const s = el('time');
        setTime(s, w.started_at);
        cell(tr, s);
        const seen = el('time');
        setTime(seen, w.seen_at);
        cell(tr, seen);
        return tr;
      });
      if (more) $('workers-body').append(...rows); else $('workers-body').replaceChildren(...rows);
      $('workers-empty').hidden = $('workers-body').children.length > 0;
      workersCursor = typeof page.next_cursor === 'string' ? page.next_cursor : '';
      $('workers-more').hidden = !workersCursor;
    } catch (e) {
      if (!(e instanceof AuthError)) $('workers-error').textContent = 'The server could not be reached. Refresh to try again.';
    }
  }

  // ---------------------------------------------------------------- wiring

  function init() {
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      signIn($('token').value);
    });
    $('token').addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey) {
        ev.preventDefault();
        $('token-form').requestSubmit();
      }
    });
    $('signout').addEventListener('click', () => expire('Signed out.'));
    $('filter-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      go(jobsParams(formFilter(), ''));
    });
    $('filter-clear').addEventListener('click', () => go(jobsParams({}, '')));
    $('jobs-refresh').addEventListener('click', () => { if (view && view.name === 'jobs') showJobs(view.params); });
    $('page-next').addEventListener('click', () => {
      const c = $('page-next').dataset.cursor;
      if (c && view) go(jobsParams(filterOf(view.params), c));
    });
    $('page-first').addEventListener('click', () => { if (view) go(jobsParams(filterOf(view.params), '')); });
    $('bulk-cancel').addEventListener('click', () => startBulk('cancel'));
    $('bulk-retry').addEventListener('click', () => startBulk('retry'));
    $('bulk-go').addEventListener('click', runBulk);
    $('bulk-back').addEventListener('click', () => {
      bulk = null;
      $('bulk-confirm').hidden = true;
      $('bulk-status').textContent = '';
    });
    $('d-cancel').addEventListener('click', cancelJob);
    $('d-retry').addEventListener('click', retryJob);
    $('types-refresh').addEventListener('click', () => { typesCursor = ''; loadTypes(false); });
    $('types-more').addEventListener('click', () => loadTypes(true));
    $('workers-refresh').addEventListener('click', () => { workersCursor = ''; loadWorkers(false); });
    $('workers-more').addEventListener('click', () => loadWorkers(true));
    window.addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', () => {
      if (!session || !view) return;
      if (document.visibilityState === 'hidden') {
        stopTimers();
      } else if (view.name === 'jobs') {
        pollStats();
      } else if (view.name === 'job') {
        loadJob(view.params.get('id') || '');
      }
    });

    const stored = sessionStorage.getItem(TOKEN_KEY);
    const s = stored ? parseToken(stored) : null;
    if (s && s.exp > Date.now()) {
      session = s;
      enter();
    } else {
      sessionStorage.removeItem(TOKEN_KEY);
      showSignin('');
    }
  }

  init();
})();
