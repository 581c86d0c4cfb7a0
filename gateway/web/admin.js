// The operator console (/admin): stats per type, the jobs with the filters
// of GET /v1/admin/jobs, one job with its attempts, cancel and retry, bulk
// cancel and retry of a filter (a dry run first), the job types (where an
// endpoint type's jobs go, its secret's age and last error; pause,
// resume, delete) and the live workers. It uses only the admin API.
//
// Live: one server push connection, GET /v1/admin/events (Server-Sent
// Events read through fetch, since an EventSource cannot send the
// Authorization header and the token never goes into a URL). Each job
// change it brings refreshes what it touches, at most once a second: the
// stats and the list, or the open job. Nothing is polled while it is up;
// while it is down the stats and an open job are read every 30 s (5 s for
// a job) and the stream is reconnected, resuming with Last-Event-ID.
//
// The chart of the last hour is hand-written SVG (renderChart): 60
// stacked bars from GET /v1/admin/stats?series=minutes, no library.
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
  const FALLBACK_EVERY_MS = 30000; // the stats, read this often only while the live stream is down
  // While jobs are queued the stats are read this often even with the live
  // stream up: a job held back by flow control (waiting for a place, rate
  // limited) or let go changes no job, so the stream says nothing of it.
  const QUEUED_EVERY_MS = 5000;
  const DETAIL_FALLBACK_MS = 5000; // an open job's, likewise
  const LIVE_THROTTLE_MS = 1000; // what the stream changed is read again at most this often
  const LIVE_RETRY_MS = 3000; // a stream that ended is reopened after this (longer after failures)
  const TICK_MS = 15000; // ages and the chart's window move on without a request
  const MAX_LIVE_EVENTS = 200; // the open job's live events kept
  const SEND_ATTEMPTS = 6; // an action is sent at most this often (network errors, 429, 503)
  const FILTERS = ['tenant', 'requester', 'type', 'state', 'category', 'waiting_for', 'created_after', 'created_before'];
  const STATES = new Set(['scheduled', 'queued', 'running', 'succeeded', 'failed', 'canceled']);
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
  const live = { ctrl: null, up: false, lastId: '', fails: 0, retryTimer: 0 };
  const wanted = new Set(); // what the stream changed and is not read again yet
  let refreshTimer = 0;
  let refreshLast = 0;
  let lastStats = null; // the last stats read, and when (ms)
  let statsAt = 0;
  let currentJob = null; // the job shown, its live events and whose result link is shown
  let jobEvents = [];
  let resultFor = '';

  class AuthError extends Error {}

  // ---------------------------------------------------------------- helpers

  const { sleep, retryAfterMs, newKey, announce, fmtTime } = window.jobgateCommon; // common.js
  const backoff = (attempt) => window.jobgateCommon.backoff(attempt, 60000);

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
    startLive();
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
    for (const id of ['stats-body', 'jobs-body', 'attempts-body', 'types-body', 'workers-body', 'chart', 'd-events']) $(id).replaceChildren();
    lastStats = null;
    for (const id of ['stats-status', 'jobs-error', 'bulk-status', 'd-status', 'types-status', 'types-error',
      'workers-error', 'app-error', 'd-error-message', 'd-params']) $(id).textContent = '';
    $('bulk-confirm').hidden = true;
    bulk = null;
    bulkFilter = null;
  }

  function expire(message) {
    stopLive();
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
    $('f-waiting').value = f.waiting_for || '';
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
      waiting_for: $('f-waiting').value,
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
    // What a job waits for is judged as it is read, not a filter the
    // bulk calls take: no bulk action on it.
    const filtered = hasFilter(f) && !f.waiting_for;
    $('bulk-cancel').disabled = !filtered;
    $('bulk-retry').disabled = !filtered;
    $('bulk-hint').hidden = filtered;
    $('bulk-hint').textContent = f.waiting_for ? 'Bulk actions do not take the Waiting for filter.' : 'Bulk actions need at least one filter.';
    if (JSON.stringify(bulkFilter) !== JSON.stringify(f)) {
      // A question or an outcome is about the filter it was asked for.
      bulk = null;
      bulkFilter = f;
      $('bulk-confirm').hidden = true;
      $('bulk-status').textContent = '';
    }
    statsFails = 0;
    loadStats();
    loadJobs(f, p.get('cursor') || '');
  }

  // loadJobs reads a page of the list; a refresh the live stream asked for
  // keeps the keyboard focus on the row it was on.
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
    const focused = document.activeElement && document.activeElement.closest ? document.activeElement.closest('#jobs-body tr') : null;
    const focusedId = focused ? focused.dataset.jobId : '';
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
    if (focusedId) {
      const again = rows.find((r) => r.dataset.jobId === focusedId);
      if (again) again.querySelector('a').focus();
    }
    $('jobs').dataset.count = String(rows.length);
    $('jobs-empty').hidden = rows.length > 0;
    const next = typeof page.next_cursor === 'string' ? page.next_cursor : '';
    $('page-next').disabled = !next;
    $('page-next').dataset.cursor = next;
    $('page-first').disabled = !cursor;
  }

  // ---------------------------------------------------------------- stats

  // loadStats reads the counts, with the last hour by minute for the
  // chart. While the live stream is down it reads them again every
  // FALLBACK_EVERY_MS while the jobs view is shown and the tab visible (a
  // 429, 503 or network error waits longer: Retry-After, or a backoff);
  // while it is up the stream's changes make it read again, and, while
  // jobs are queued, every QUEUED_EVERY_MS (the flow counts).
  async function loadStats() {
    clearTimeout(statsTimer);
    statsTimer = 0;
    if (!session || !view || view.name !== 'jobs' || document.visibilityState === 'hidden') return;
    const f = filterOf(view.params);
    const q = new URLSearchParams({ series: 'minutes' });
    if (f.tenant) q.set('tenant', f.tenant);
    let wait = FALLBACK_EVERY_MS;
    let queued = false;
    try {
      const resp = await api(`/v1/admin/stats?${q}`);
      if (resp.ok) {
        statsFails = 0;
        const s = await resp.json();
        renderStats(s, false);
        queued = Array.isArray(s.types) && s.types.some((t) => Number(t.queued) > 0);
      } else if (resp.status === 429 || resp.status === 503) {
        wait = Math.max(FALLBACK_EVERY_MS, retryAfterMs(resp, backoff(++statsFails)));
        $('stats-status').textContent = `The server is busy; next look in ${Math.ceil(wait / 1000)} s.`;
      } else {
        $('stats-status').textContent = await problemText(resp);
        wait = Math.max(FALLBACK_EVERY_MS, backoff(++statsFails));
      }
    } catch (e) {
      if (e instanceof AuthError) return;
      wait = Math.max(FALLBACK_EVERY_MS, backoff(++statsFails));
      $('stats-status').textContent = 'The server could not be reached; trying again.';
    }
    if (session && view && view.name === 'jobs' && document.visibilityState !== 'hidden' && (!live.up || queued)) {
      clearTimeout(statsTimer);
      statsTimer = setTimeout(loadStats, live.up ? QUEUED_EVERY_MS : wait);
    }
  }

  // serverNow is the server's clock now, from the last stats' `at`.
  function serverNow() {
    const at = lastStats ? Date.parse(lastStats.at) : NaN;
    return Number.isFinite(at) ? at + (Date.now() - statsAt) : Date.now();
  }

  // renderStats shows the counts; a tick (again) moves the ages on by the
  // time since they were read.
  function renderStats(s, again) {
    if (!again) {
      lastStats = s;
      statsAt = Date.now();
    }
    const since = (Date.now() - statsAt) / 1000;
    const types = Array.isArray(s.types) ? s.types : [];
    const rows = types.map((t) => {
      const tr = el('tr', null, { 'data-type': String(t.type) });
      const th = el('th', t.type, { scope: 'row' });
      tr.append(th);
      const n = (v) => (Number.isFinite(v) ? v : 0);
      // Work and no worker: nothing will run the type's jobs until a
      // worker of the type starts (or, paused, until it is resumed).
      // An endpoint type has no worker processes: jobgate calls its HTTP
      // endpoint.
      const endpoint = t.endpoint === true;
      const idle = n(t.queued) + n(t.retrying) > 0 && ((n(t.workers) === 0 && !endpoint) || t.paused === true);
      tr.dataset.noWorker = String(idle && n(t.workers) === 0 && !endpoint);
      const shown = endpoint ? 'endpoint' : n(t.workers);
      const w = cell(tr, t.paused === true ? `${shown}, paused` : shown);
      w.dataset.k = 'workers';
      if (idle) {
        w.classList.add('flag');
        w.title = t.paused === true ? 'Paused: its jobs wait until it is resumed.' : 'No live worker: its jobs wait until one starts.';
        w.append(el('span', t.paused === true ? ' — jobs wait for the resume' : ' — no worker for this work'));
      }
      for (const [k, v] of [['queued', t.queued], ['running', t.running], ['retrying', t.retrying], ['scheduled', t.scheduled]]) {
        cell(tr, n(v)).dataset.k = k;
      }
      // The jobs its flow control holds back, each count a link to them.
      for (const [k, v, wf] of [['waiting_concurrency', t.waiting_concurrency, 'concurrency'], ['rate_limited', t.rate_limited, 'rate limit']]) {
        let c = n(v);
        if (c > 0) {
          c = el('a', c);
          c.href = `#${new URLSearchParams({ view: 'jobs', type: String(t.type), waiting_for: wf })}`;
        }
        cell(tr, c).dataset.k = k;
      }
      const age = Number(t.oldest_queued_seconds) || 0;
      cell(tr, fmtAge(age > 0 ? age + since : 0)).dataset.k = 'oldest';
      for (const [w, win] of [['hour', t.last_hour], ['day', t.last_day]]) {
        for (const k of ['succeeded', 'failed', 'canceled']) cell(tr, n(win && win[k])).dataset.k = `${w}-${k}`;
      }
      return tr;
    });
    if (rows.length === 0) {
      const tr = el('tr');
      cell(tr, 'No jobs counted yet.').colSpan = 15;
      rows.push(tr);
    }
    $('stats-body').replaceChildren(...rows);
    if (!again) $('stats-status').textContent = `Updated ${new Date().toLocaleTimeString()}`;
    chartTypes(types);
    renderChart();
  }

  // ---------------------------------------------------------------- chart

  // The chart is drawn by hand as SVG: 60 stacked bars (succeeded, failed,
  // canceled) and three labels need no library, and elements made with
  // createElementNS and textContent keep the page's rules (no markup
  // parsed, no inline style: the colours are classes in admin.css).
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const SERIES = ['succeeded', 'failed', 'canceled'];

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // chartTypes keeps the chart's type choice in step with the types counted.
  function chartTypes(types) {
    const sel = $('chart-type');
    const names = types.map((t) => String(t.type));
    const have = [...sel.options].slice(1).map((o) => o.value);
    if (JSON.stringify(have) === JSON.stringify(names)) return;
    const chosen = sel.value;
    sel.replaceChildren(el('option', 'All types', { value: '' }), ...names.map((n) => el('option', n, { value: n })));
    sel.value = names.includes(chosen) ? chosen : '';
  }

  // minuteCounts sums the chosen type's series (every type's for '') into
  // the 60 minutes up to the server's current one.
  function minuteCounts(types, only, now) {
    const first = Math.floor(now / 60000) - 59;
    const out = Array.from({ length: 60 }, (_, i) => ({ minute: first + i, succeeded: 0, failed: 0, canceled: 0 }));
    for (const t of types) {
      if (only && t.type !== only) continue;
      const m = t.minutes;
      if (!m || typeof m !== 'object') continue;
      const start = Math.floor(Date.parse(m.start) / 60000);
      if (!Number.isFinite(start)) continue;
      for (const k of SERIES) {
        (Array.isArray(m[k]) ? m[k] : []).forEach((v, i) => {
          const j = start + i - first;
          const n = Number(v);
          if (j >= 0 && j < 60 && Number.isFinite(n) && n > 0) out[j][k] += n;
        });
      }
    }
    return out;
  }

  function renderChart() {
    if (!lastStats) return;
    const types = Array.isArray(lastStats.types) ? lastStats.types : [];
    const only = $('chart-type').value;
    const mins = minuteCounts(types, only, serverNow());
    const peak = Math.max(1, ...mins.map((m) => m.succeeded + m.failed + m.canceled));
    const W = 600; const H = 160; const L = 34; const R = 4; const T = 10; const B = 20;
    const bw = (W - L - R) / 60;
    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img', 'aria-labelledby': 'chart-summary', focusable: 'false' });
    root.append(
      svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }),
      svg('line', { x1: L, y1: T, x2: W - R, y2: T, class: 'grid-line' }),
      svg('text', { x: L - 5, y: T + 4, class: 'tick', 'text-anchor': 'end' }, peak),
      svg('text', { x: L - 5, y: H - B + 4, class: 'tick', 'text-anchor': 'end' }, 0),
      svg('text', { x: L, y: H - 5, class: 'tick', 'text-anchor': 'start' }, '−60 min'),
      svg('text', { x: L + 30 * bw, y: H - 5, class: 'tick', 'text-anchor': 'middle' }, '−30 min'),
      svg('text', { x: W - R, y: H - 5, class: 'tick', 'text-anchor': 'end' }, 'now'),
    );
    const total = { succeeded: 0, failed: 0, canceled: 0 };
    mins.forEach((m, i) => {
      let y = H - B;
      const g = svg('g', { 'data-minute': i });
      const at = new Date(m.minute * 60000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
      g.append(svg('title', null, `${at}: ${m.succeeded} succeeded, ${m.failed} failed, ${m.canceled} canceled`));
      for (const k of SERIES) {
        if (!m[k]) continue;
        total[k] += m[k];
        const h = (m[k] / peak) * (H - B - T);
        y -= h;
        g.append(svg('rect', {
          x: (L + i * bw + 0.5).toFixed(1), y: y.toFixed(1), width: Math.max(1, bw - 1).toFixed(1), height: h.toFixed(1),
          class: `bar bar-${k}`, 'data-state': k, 'data-n': m[k],
        }));
      }
      if (g.childNodes.length > 1) root.append(g);
    });
    $('chart').replaceChildren(root);
    $('chart').dataset.succeeded = String(total.succeeded);
    $('chart').dataset.failed = String(total.failed);
    $('chart').dataset.canceled = String(total.canceled);
    const sum = total.succeeded + total.failed + total.canceled;
    $('chart-summary').textContent = sum === 0 ? `${only || 'All types'}: no job finished in the last hour.` :
      `${only || 'All types'}, last hour: ${total.succeeded} succeeded, ${total.failed} failed, ${total.canceled} canceled; ` +
      `at most ${peak} in one minute.`;
  }

  // tick moves the ages and the chart's window on, from the last stats.
  function tick() {
    if (session && view && view.name === 'jobs' && lastStats && document.visibilityState !== 'hidden') renderStats(lastStats, true);
  }

  // ---------------------------------------------------------------- live

  function liveStatus(state, text) {
    $('live-status').dataset.live = state;
    $('live-status').textContent = text;
  }

  // startLive opens the one event stream of this sign-in and reads it until
  // it ends; then it is reopened (resuming after the last event seen) and,
  // meanwhile, the fallback reads run.
  function startLive() {
    if (!session || live.ctrl) return;
    clearTimeout(live.retryTimer);
    const ctrl = new AbortController();
    live.ctrl = ctrl;
    (async () => {
      let wait = LIVE_RETRY_MS;
      try {
        const headers = { Accept: 'text/event-stream' };
        if (live.lastId) headers['Last-Event-ID'] = live.lastId;
        const resp = await api('/v1/admin/events', { headers, signal: ctrl.signal });
        if (!resp.ok || !resp.body) {
          wait = retryAfterMs(resp, backoff(live.fails + 1));
          liveStatus('off', resp.status === 429 ? 'Live updates refused (too many streams open)' : 'Live updates unavailable');
        } else {
          await readLive(ctrl, resp.body);
        }
      } catch (e) {
        if (e instanceof AuthError) return;
        wait = backoff(live.fails + 1);
      }
      liveDown(ctrl, wait);
    })();
  }

  async function readLive(ctrl, body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    ctrl.signal.addEventListener('abort', () => { reader.cancel().catch(() => {}); });
    liveUp(ctrl);
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done || live.ctrl !== ctrl) return;
      buf += value.replace(/\r\n?/g, '\n');
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        liveMessage(buf.slice(0, cut));
        buf = buf.slice(cut + 2);
      }
      if (buf.length > 1 << 20) return; // no event is this large
    }
  }

  // liveMessage handles one Server-Sent Event.
  function liveMessage(block) {
    let name = 'message';
    let id = null;
    const data = [];
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') name = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
    }
    if (id !== null && /^[0-9]+$/.test(id)) live.lastId = id;
    if (name !== 'job' || data.length === 0) return;
    let j = null;
    try { j = JSON.parse(data.join('\n')); } catch { return; }
    if (j && typeof j === 'object' && typeof j.id === 'string') onJobChange(j);
  }

  function liveUp(ctrl) {
    if (live.ctrl !== ctrl) return;
    live.up = true;
    live.fails = 0;
    clearTimeout(statsTimer);
    clearTimeout(detailTimer);
    statsTimer = 0;
    detailTimer = 0;
    liveStatus('on', 'Live');
    // What changed while it was down is read once, now.
    wanted.add('stats').add('list').add('job');
    flushRefresh();
  }

  function liveDown(ctrl, wait) {
    if (live.ctrl !== ctrl) return; // stopped on purpose
    live.ctrl = null;
    const wasUp = live.up;
    live.up = false;
    live.fails++;
    if (session) {
      // A refusal's own words stay until the next try gets through.
      if (wasUp || !$('live-status').textContent.startsWith('Live updates')) liveStatus('off', 'Live updates paused; reading every 30 s');
      live.retryTimer = setTimeout(startLive, wait);
      fallback();
    }
  }

  function stopLive() {
    const ctrl = live.ctrl;
    live.ctrl = null;
    live.up = false;
    live.lastId = '';
    clearTimeout(live.retryTimer);
    clearTimeout(refreshTimer);
    refreshTimer = 0;
    wanted.clear();
    if (ctrl) ctrl.abort();
  }

  // fallback starts the slow reads of the view shown.
  function fallback() {
    if (!view || document.visibilityState === 'hidden') return;
    if (view.name === 'jobs' && !statsTimer) statsTimer = setTimeout(loadStats, FALLBACK_EVERY_MS);
    if (view.name === 'job' && !detailTimer && currentJob && !TERMINAL.has(currentJob.state)) {
      const id = currentJob.id;
      detailTimer = setTimeout(() => loadJob(id), DETAIL_FALLBACK_MS);
    }
  }

  // onJobChange is one job's change from the stream: what it touches is
  // read again (at most once per LIVE_THROTTLE_MS).
  function onJobChange(j) {
    if (!view) return;
    if (view.name === 'jobs') {
      want('stats');
      want('list');
    } else if (view.name === 'job' && view.params.get('id') === j.id) {
      jobEvents.push({ at: typeof j.updated_at === 'string' ? j.updated_at : new Date().toISOString(), state: String(j.state),
        attempt: Number(j.attempt) || 0, progress: j.progress && typeof j.progress === 'object' ? j.progress : null });
      if (jobEvents.length > MAX_LIVE_EVENTS) jobEvents.shift();
      if (currentJob) renderEvents(currentJob);
      want('job');
    }
  }

  function want(what) {
    wanted.add(what);
    if (refreshTimer) return;
    refreshTimer = setTimeout(flushRefresh, Math.max(0, refreshLast + LIVE_THROTTLE_MS - Date.now()));
  }

  // flushRefresh reads again what the stream changed; a hidden tab waits
  // until it is shown.
  function flushRefresh() {
    clearTimeout(refreshTimer);
    refreshTimer = 0;
    if (!session || !view || document.visibilityState === 'hidden' || wanted.size === 0) return;
    refreshLast = Date.now();
    const w = new Set(wanted);
    wanted.clear();
    if (view.name === 'jobs') {
      if (w.has('stats')) loadStats();
      if (w.has('list')) loadJobs(filterOf(view.params), view.params.get('cursor') || '');
    } else if (view.name === 'job' && w.has('job')) {
      loadJob(view.params.get('id') || '');
    }
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
    if (!hasFilter(f) || f.waiting_for) return;
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
      // A job that failed permanently (its error not retryable) is left
      // out of a retry unless the box is ticked: the server retries it
      // only with confirm_permanent.
      const permanent = action === 'retry' ? Number(r.permanent) || 0 : 0;
      bulk.base = n;
      bulk.permanent = permanent;
      bulk.confirmPermanent = false;
      $('bulk-question').textContent = `${verb} ${n} of the ${jobs(r.matched)} matching ${describe(f)}${more}? ` +
        `${r.skipped - permanent} would be left as they are.` +
        (permanent ? ` ${permanent} of these failed permanently (their error is not retryable): ` +
          'a retry will likely fail the same way, so they are left out unless you tick the box.' : '');
      $('bulk-permanent-box').hidden = permanent === 0;
      $('bulk-permanent').checked = false;
      $('bulk-permanent-label').textContent = `Retry the ${jobs(permanent)} that failed permanently too`;
      bulkGoLabel();
      $('bulk-confirm').hidden = false;
      $('bulk-confirm').dataset.action = action;
      $('bulk-confirm').dataset.permanent = String(permanent);
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

  // bulkGoLabel names what the confirm button does: the dry run's count,
  // with the permanent failures when the box is ticked.
  function bulkGoLabel() {
    if (!bulk) return;
    const total = bulk.base + (bulk.confirmPermanent ? bulk.permanent : 0);
    $('bulk-go').textContent = `${bulk.action === 'cancel' ? 'Cancel' : 'Retry'} ${jobs(total)}`;
    $('bulk-go').disabled = total === 0;
    $('bulk-confirm').dataset.count = String(total);
  }

  // runBulk does it: one Idempotency-Key for this confirmation, used by
  // every call (a resend, or the next part after a truncated answer).
  async function runBulk() {
    if (!bulk) return;
    const b = bulk;
    b.key = b.key || newKey();
    $('bulk-go').disabled = true;
    $('bulk-back').disabled = true;
    const total = { canceled: 0, retried: 0, replayed: 0, skipped: 0, failed: 0, permanent: 0 };
    const confirm = b.action === 'retry' && b.confirmPermanent ? { confirm_permanent: true } : {};
    let cursor = '';
    let stopped = '';
    try {
      for (let part = 0; part < 100; part++) {
        const headers = { 'Content-Type': 'application/json' };
        if (b.action === 'retry') headers['Idempotency-Key'] = b.key;
        const resp = await send(`/v1/admin/jobs/${b.action}`, {
          method: 'POST', headers, body: bulkBody(b, cursor ? { cursor, ...confirm } : confirm),
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
    const leftPermanent = b.action === 'retry' && !b.confirmPermanent ? total.permanent : 0;
    const msg = `${done}; ${total.skipped} left as they were` +
      `${leftPermanent ? ` (${leftPermanent} of them failed permanently and were not retried)` : ''}` +
      `${total.failed ? `, ${total.failed} could not be changed (confirm again to finish)` : ''}.` +
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
      loadStats();
    }
  }

  // ---------------------------------------------------------------- one job

  function showJob(id) {
    $('d-status').textContent = '';
    jobEvents = [];
    resultFor = '';
    renderJob(null);
    loadJob(id);
    $('detail-h').focus();
  }

  async function loadJob(id) {
    clearTimeout(detailTimer);
    const gen = ++detailGen;
    let wait = DETAIL_FALLBACK_MS;
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
    if ((j && TERMINAL.has(j.state)) || live.up) return;
    if (session && view && view.name === 'job' && view.params.get('id') === id && document.visibilityState !== 'hidden') {
      detailTimer = setTimeout(() => loadJob(id), wait);
    }
  }

  function renderJob(j) {
    const v = $('view-job');
    currentJob = j;
    if (!j) {
      $('d-events').replaceChildren();
      $('d-result').hidden = true;
      delete v.dataset.jobId;
      delete v.dataset.state;
      for (const id of ['d-id', 'd-state', 'd-type', 'd-tenant', 'd-requester', 'd-attempt', 'd-params', 'd-error-message']) $(id).textContent = '';
      $('d-retry-of').replaceChildren();
      $('d-retried-as').replaceChildren();
      $('attempts-body').replaceChildren();
      $('d-error').hidden = true;
      $('d-waiting').hidden = true;
      $('d-retry-confirm').hidden = true;
      $('d-cancel').disabled = true;
      $('d-retry').disabled = true;
      $('d-run-now').hidden = true;
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
    // What a waiting job waits for (waiting_for): nothing starts it until
    // a worker of its type runs, or its type is resumed.
    const waits = j.state === 'scheduled' && j.run_at ? `Scheduled: no attempt starts before ${fmtTime(j.run_at)} ` +
      '(Run now makes it due at once).' : j.waiting_for === 'worker' ? `Waiting for a worker: no live worker runs ${j.type}; ` +
      'the job stays queued until one starts (see Workers).' :
      j.waiting_for === 'resume' ? `Waiting for the resume: an operator paused ${j.type}; the job stays queued until it is resumed.` :
      j.waiting_for === 'concurrency' ? `Waiting for a concurrency place: as many jobs of ${j.type} with its key as the limit allows ` +
      'are running; it starts when one of them ends.' :
      j.waiting_for === 'rate limit' ? `Rate limited: the rate limit of ${j.type} is spent for now; it starts when a token is due.` : '';
    $('d-waiting').textContent = waits;
    $('d-waiting').hidden = !waits;
    $('d-waiting').dataset.waitingFor = j.waiting_for || '';
    $('d-error-category').textContent = j.error ? j.error.category : '';
    $('d-error-message').textContent = j.error ? j.error.message : '';
    let params = '';
    try { params = JSON.stringify(j.params, null, 2); } catch { params = String(j.params); }
    $('d-params').textContent = params;
    $('d-cancel').disabled = TERMINAL.has(j.state);
    $('d-retry').disabled = j.state !== 'failed' && j.state !== 'canceled';
    $('d-run-now').hidden = j.state !== 'scheduled';
    $('d-run-now').disabled = false;
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
    renderEvents(j);
    if (j.state === 'succeeded') {
      if (resultFor !== j.id) loadResultLink(j.id);
    } else {
      $('d-result').hidden = true;
    }
  }

  // renderEvents is the job's timeline: what its record says (submitted,
  // each attempt's start and end, finished) and each change the stream
  // brought while the page is open.
  function renderEvents(j) {
    const items = [];
    const add = (at, text, kind) => { if (at) items.push({ at: String(at), t: Date.parse(at) || 0, text, kind }); };
    add(j.created_at, 'Submitted', 'record');
    for (const a of Array.isArray(j.attempts) ? j.attempts : []) {
      add(a.started_at, `Attempt ${a.attempt} started on ${a.worker}`, 'record');
      if (a.ended_at) add(a.ended_at, `Attempt ${a.attempt} ended: ${a.outcome || 'ended'}${a.error ? ` (${a.error.category})` : ''}`, 'record');
    }
    if (j.retry_at && !TERMINAL.has(j.state)) add(j.retry_at, 'Next attempt due', 'record');
    if (j.finished_at) add(j.finished_at, `Finished: ${j.state}`, 'record');
    for (const e of jobEvents) {
      const p = e.progress ? `, ${Number(e.progress.done) || 0} of ${Number(e.progress.total) || 0} ${e.progress.unit || ''}`.trimEnd() : '';
      add(e.at, `Change: ${e.state}, attempt ${e.attempt}${p}`, 'live');
    }
    items.sort((a, b) => a.t - b.t);
    $('d-events').replaceChildren(...items.map((i) => {
      const li = el('li', null, { 'data-kind': i.kind });
      const t = el('time');
      setTime(t, i.at);
      li.append(t, ' ', el('span', i.text));
      return li;
    }));
  }

  // loadResultLink fetches a fresh signed link to a succeeded job's result
  // (GET /v1/admin/jobs/{id}/result) once per job shown, and puts it in the
  // page's link: the link needs no token, the token stays in this script.
  async function loadResultLink(id) {
    resultFor = id;
    $('d-result').hidden = true;
    try {
      const resp = await api(`/v1/admin/jobs/${encodeURIComponent(id)}/result`);
      if (!currentJob || currentJob.id !== id) return;
      if (resp.status === 404) {
        $('d-result-link').removeAttribute('href');
        $('d-result-note').textContent = 'This job succeeded without a result file.';
        $('d-result').hidden = false;
        return;
      }
      if (!resp.ok) {
        resultFor = '';
        return;
      }
      const r = await resp.json();
      if (!currentJob || currentJob.id !== id) return;
      if (!r || typeof r.href !== 'string' || !r.href.startsWith('/v1/results/')) return;
      $('d-result-link').href = r.href;
      $('d-result-note').textContent = `(valid until ${fmtTime(r.expires_at)})`;
      $('d-result').hidden = false;
    } catch (e) {
      if (!(e instanceof AuthError)) resultFor = '';
    }
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

  // runNowJob makes a scheduled job due at once (POST .../run-now).
  async function runNowJob() {
    const id = $('view-job').dataset.jobId;
    if (!id) return;
    $('d-run-now').disabled = true;
    $('d-status').textContent = 'Queuing…';
    try {
      const resp = await send(`/v1/admin/jobs/${encodeURIComponent(id)}/run-now`, { method: 'POST' });
      if (resp.ok) {
        const j = await resp.json();
        if ($('view-job').dataset.jobId === id) renderJob(j);
        $('d-status').textContent = `Queued ${id} to run now.`;
        announce(`Queued ${id} to run now.`);
      } else {
        $('d-status').textContent = await problemText(resp);
        loadJob(id);
      }
    } catch (e) {
      if (!(e instanceof AuthError)) $('d-status').textContent = 'The server could not be reached. Try again.';
      $('d-run-now').disabled = false;
    }
  }

  // failedPermanently mirrors the server's rule (job.FailedPermanently):
  // failed with an error that is not retryable, other than exhausted and
  // expired (the attempts or the time ran out).
  function failedPermanently(j) {
    return !!j && j.state === 'failed' && !!j.error && j.error.retryable === false &&
      j.error.category !== 'exhausted' && j.error.category !== 'expired';
  }

  // askRetryAnyway shows the confirmation a retry of a job that failed
  // permanently needs.
  function askRetryAnyway(j) {
    const cat = j && j.error ? j.error.category : 'a permanent error';
    $('d-retry-question').textContent = `This job failed permanently (${cat}, not retryable): ` +
      'a retry will likely fail the same way. Retry it anyway?';
    $('d-retry-confirm').hidden = false;
    $('d-status').textContent = '';
    $('d-retry-anyway').focus();
  }

  // retryJob makes the job's retry: one Idempotency-Key per click, the
  // same on every resend of that request, so a lost answer makes no second
  // job. A job that failed permanently is retried only once confirmed
  // (confirm: the "Retry anyway" button), with ?confirm_permanent=true.
  async function retryJob(confirm) {
    const id = $('view-job').dataset.jobId;
    if (!id) return;
    confirm = confirm === true;
    if (!confirm && failedPermanently(currentJob)) {
      askRetryAnyway(currentJob);
      return;
    }
    $('d-retry-confirm').hidden = true;
    const key = newKey();
    $('d-retry').disabled = true;
    $('d-status').textContent = 'Retrying…';
    try {
      const q = confirm ? '?confirm_permanent=true' : '';
      const resp = await send(`/v1/admin/jobs/${encodeURIComponent(id)}/retry${q}`, { method: 'POST', headers: { 'Idempotency-Key': key } },
        (ms) => { $('d-status').textContent = `The server is busy; trying again in ${Math.ceil(ms / 1000)} s…`; });
      if (resp.status === 409 && !confirm) {
        const text = await problemText(resp);
        if (text.includes('permanently')) {
          askRetryAnyway(currentJob);
          $('d-retry').disabled = false;
          return;
        }
        $('d-status').textContent = text;
        $('d-retry').disabled = false;
        return;
      }
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
      // The admin listing: /v1/types' entries with the owner and, for an
      // endpoint type, its secret's age.
      const resp = await send(`/v1/admin/types?${q}`, {});
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
    endpointCells(tr, name, t);
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

  // endpointCells shows where an endpoint type's jobs go (the URL's scheme
  // and host: the API never shows its path), its signing secret's age and
  // its last failed job's error, read from the job listing; "—" for a
  // worker's type.
  function endpointCells(tr, name, t) {
    const ep = t.endpoint && typeof t.endpoint.url === 'string' ? t.endpoint : null;
    tr.dataset.endpoint = String(ep !== null);
    cell(tr, ep ? ep.url : '—').dataset.k = 'endpoint';
    const since = ep && t.secret_since ? Date.parse(String(t.secret_since)) : NaN;
    const age = cell(tr, Number.isFinite(since) ? fmtAge((serverNow() - since) / 1000) : '—');
    age.dataset.k = 'secret-age';
    if (Number.isFinite(since)) age.title = `Signing secret made ${fmtTime(t.secret_since)}`;
    const last = cell(tr, ep ? '…' : '—');
    last.dataset.k = 'last-error';
    if (ep) lastError(last, name);
  }

  async function lastError(td, name) {
    try {
      const q = new URLSearchParams({ type: name, state: 'failed', limit: '1' });
      const resp = await send(`/v1/admin/jobs?${q}`, {});
      if (!resp.ok) {
        td.textContent = '';
        return;
      }
      const page = await resp.json();
      const j = Array.isArray(page.jobs) && page.jobs.length > 0 ? page.jobs[0] : null;
      if (!j || !j.error) {
        td.textContent = 'none';
        return;
      }
      td.replaceChildren(jobLink(String(j.id)), document.createTextNode(` ${j.error.category || ''}: ${j.error.message || ''}`));
      td.title = fmtTime(j.finished_at || j.updated_at || j.created_at);
    } catch (e) {
      if (!(e instanceof AuthError)) td.textContent = '';
    }
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
    $('bulk-permanent').addEventListener('change', () => {
      if (!bulk) return;
      bulk.confirmPermanent = $('bulk-permanent').checked;
      bulkGoLabel();
    });
    $('bulk-back').addEventListener('click', () => {
      bulk = null;
      $('bulk-confirm').hidden = true;
      $('bulk-status').textContent = '';
    });
    $('chart-type').addEventListener('change', renderChart);
    $('d-cancel').addEventListener('click', cancelJob);
    $('d-run-now').addEventListener('click', runNowJob);
    $('d-retry').addEventListener('click', () => retryJob(false));
    $('d-retry-anyway').addEventListener('click', () => retryJob(true));
    $('d-retry-keep').addEventListener('click', () => {
      $('d-retry-confirm').hidden = true;
      $('d-retry').focus();
    });
    $('types-refresh').addEventListener('click', () => { typesCursor = ''; loadTypes(false); });
    $('types-more').addEventListener('click', () => loadTypes(true));
    $('workers-refresh').addEventListener('click', () => { workersCursor = ''; loadWorkers(false); });
    $('workers-more').addEventListener('click', () => loadWorkers(true));
    window.addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', () => {
      if (!session || !view) return;
      if (document.visibilityState === 'hidden') {
        stopTimers();
      } else if (live.up) {
        flushRefresh();
      } else if (view.name === 'jobs') {
        loadStats();
      } else if (view.name === 'job') {
        loadJob(view.params.get('id') || '');
      }
    });
    setInterval(tick, TICK_MS);

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
