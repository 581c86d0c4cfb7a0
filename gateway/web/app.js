// The reviewer's page: sign in, request a permit report, watch it, download it.
//
// Storage (see README, "The reviewer's page"):
//   sessionStorage jobgate.token            the bearer token: this tab only, gone when the tab closes;
//                                           it survives a reload and is never put in a URL
//   localStorage   jobgate.pending.<t>/<s>  requests not yet acknowledged by the server, each with the
//                                           idempotency key made once per click; a reload, a crash or
//                                           a later sign-in resends them with the same key
//   localStorage   jobgate.view.<t>/<s>     the job in the live view, restored on reload or reopen
//   sessionStorage jobgate.batch.<t>/<s>    the batch of revisions this tab watches: its id, its
//                                           items and the last event id of the requester stream,
//                                           so a reload finds it and resumes the stream
// The job list itself always comes from the server (GET /v1/jobs).
//
// Deep link: `/#job=<id>` (the link in a notice mail) opens that job after
// sign-in. The id rides in the fragment, which a browser never sends to the
// server, so it shows up in no access log.
(() => {
  'use strict';

  const TOKEN_KEY = 'jobgate.token';
  const PENDING_PREFIX = 'jobgate.pending.';
  const VIEW_PREFIX = 'jobgate.view.';
  const BATCH_PREFIX = 'jobgate.batch.';
  const MAX_BATCH = 1000; // items of one POST /v1/batches
  // A key protects against duplicates only while the job record lives
  // (JOBGATE_JOB_TTL, 720h by default); a request that never got an answer
  // for a day is dropped rather than risk admitting it twice much later.
  const PENDING_MAX_AGE_MS = 24 * 3600 * 1000;
  const LIST_REFRESH_MS = 10000;
  const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);

  const $ = (id) => document.getElementById(id);

  let session = null; // {token, tenant, sub, exp}
  const jobs = new Map(); // id -> job resource
  let order = []; // ids, newest first
  let selected = null; // id of the job in the live view
  let watcher = null; // the live view's Watcher
  let batch = null; // the watched batch: {id, ids, items, last}
  let feed = null; // the batch's Feed over GET /v1/events
  let sending = null; // the pending entry being sent, if any
  let giveUp = false;
  let sendPause = null; // aborts the wait between two attempts when the reviewer stops retrying
  let expiryTimer = 0;
  let listTimer = 0;

  class AuthError extends Error {}

  // ---------------------------------------------------------------- helpers

  const { sleep, retryAfterMs, newKey, announce, fmtTime } = window.jobgateCommon; // common.js
  const backoff = (attempt) => window.jobgateCommon.backoff(attempt, 30000);

  function setTime(el, s) {
    el.textContent = fmtTime(s);
    if (s) el.setAttribute('datetime', s); else el.removeAttribute('datetime');
  }

  function fmtSize(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
    return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  }

  // The kinds of result file the page names: a job's result says its media
  // type (result.content_type, the one its type declared), which gives the
  // download's file name extension and the button's words. The server's
  // Content-Disposition (attachment; filename="<job id><ext>") has the last
  // word on the name; this only keeps the page from calling a CSV a PDF.
  const RESULT_KINDS = {
    'application/pdf': ['.pdf', 'PDF'],
    'text/csv': ['.csv', 'CSV'],
    'text/tab-separated-values': ['.tsv', 'TSV'],
    'text/plain': ['.txt', 'text'],
    'application/json': ['.json', 'JSON'],
    'application/zip': ['.zip', 'ZIP'],
    'application/gzip': ['.gz', 'archive'],
    'application/xml': ['.xml', 'XML'],
    'text/xml': ['.xml', 'XML'],
    'text/markdown': ['.md', 'text'],
    'text/html': ['.html', 'HTML'],
    'image/png': ['.png', 'image'],
    'image/jpeg': ['.jpg', 'image'],
    'image/svg+xml': ['.svg', 'image'],
    'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': ['.xlsx', 'spreadsheet'],
    'application/vnd.openxmlformats-officedocument.wordprocessingml.document': ['.docx', 'document'],
  };

  // resultKind is {ext, label} for a media type such as "text/csv;
  // charset=utf-8"; any other type is a file ".bin".
  function resultKind(contentType) {
    const mt = String(contentType || '').split(';')[0].trim().toLowerCase();
    const k = Object.prototype.hasOwnProperty.call(RESULT_KINDS, mt) ? RESULT_KINDS[mt] : ['.bin', 'file'];
    return { ext: k[0], label: k[1] };
  }

  // resultFileName is the name a download of the job's result is saved as.
  function resultFileName(job) {
    return `${job.id}${resultKind(job.result && job.result.content_type).ext}`;
  }

  // describe names a job in one line. Params are the user's own strings:
  // the result is only ever assigned to textContent, never parsed as markup.
  function describe(job) {
    const p = job.params || {};
    if (job.type === 'permit_report') return `Case ${p.case_id} · revision ${p.revision} · ${p.pages ?? 10} pages`;
    const parts = Object.entries(p).slice(0, 6)
      .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`);
    return [String(job.type)].concat(parts).join(' · ');
  }

  // rank orders states by how far a job got: states only move forward.
  function rank(state) {
    if (TERMINAL.has(state)) return 2;
    return state === 'running' ? 1 : 0;
  }

  function stateWords(job) {
    switch (job.state) {
      case 'queued': return 'queued';
      case 'running': return job.retry_at ? 'retrying' : 'rendering';
      case 'succeeded': return 'ready';
      default: return job.state;
    }
  }

  // ---------------------------------------------------------------- API

  async function api(path, init = {}) {
    if (!session) throw new AuthError('signed out');
    const headers = new Headers(init.headers || {});
    headers.set('Authorization', `Bearer ${session.token}`);
    const resp = await fetch(path, { ...init, headers, cache: 'no-store', credentials: 'omit' });
    if (resp.status === 401) {
      expire('Your sign-in has expired or was rejected. Sign in again; nothing you requested is lost.');
      throw new AuthError('unauthorized');
    }
    return resp;
  }

  async function problemOf(resp) {
    try {
      return await resp.json();
    } catch {
      return { title: `HTTP ${resp.status}`, status: resp.status };
    }
  }

  // ---------------------------------------------------------------- session

  function parseToken(token) {
    const parts = token.split('.');
    if (parts.length !== 3) return null;
    try {
      let b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
      while (b64.length % 4) b64 += '=';
      const c = JSON.parse(atob(b64));
      if (typeof c.tenant !== 'string' || typeof c.sub !== 'string') return null;
      return { token, tenant: c.tenant, sub: c.sub, admin: !!c.admin, exp: typeof c.exp === 'number' ? c.exp * 1000 : Infinity };
    } catch {
      return null;
    }
  }

  function scopeKey(prefix) {
    return `${prefix}${session.tenant}/${session.sub}`;
  }

  function showSignin(message) {
    $('app').hidden = true;
    $('whoami').hidden = true;
    $('signin').hidden = false;
    $('dev-form').hidden = document.body.dataset.dev !== 'true';
    $('signin-error').textContent = message || '';
    $('token').value = '';
  }

  // A token is accepted once the server accepts it: the list of the
  // reviewer's jobs is the first thing the page needs anyway.
  async function signIn(token) {
    const s = parseToken(token.trim());
    if (!s) {
      $('signin-error').textContent = 'That is not a jobgate token (a JWT with tenant and sub claims).';
      return;
    }
    if (s.exp <= Date.now()) {
      $('signin-error').textContent = 'That token has expired.';
      return;
    }
    session = s;
    let ok = false;
    try {
      ok = await loadJobs();
    } catch (e) {
      if (e instanceof AuthError) return; // expire() already said why
      $('signin-error').textContent = 'The server could not be reached. Try again.';
    }
    if (!ok) {
      session = null;
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, s.token);
    enter(true);
  }

  // enter shows the signed-in page: requests that never got an answer are
  // sent again (same keys), and the list and the live view come back.
  async function enter(listed) {
    $('signin').hidden = true;
    $('app').hidden = false;
    $('whoami').hidden = false;
    $('who').textContent = `${session.sub} · tenant ${session.tenant}` +
      (Number.isFinite(session.exp) ? ` · until ${new Date(session.exp).toLocaleTimeString()}` : '');
    clearTimeout(expiryTimer);
    if (Number.isFinite(session.exp)) {
      expiryTimer = setTimeout(() => expire('Your sign-in has expired. Sign in again; nothing you requested is lost.'),
        Math.min(session.exp - Date.now(), 2 ** 31 - 1));
    }
    updateRequestButton();
    $('case').focus();
    resumePending();
    if (!listed && !(await loadJobsRetrying())) return;
    restoreBatch();
    restoreView();
  }

  async function loadJobsRetrying() {
    for (let attempt = 0; session; attempt++) {
      try {
        if (await loadJobs()) return true;
      } catch (e) {
        if (e instanceof AuthError) return false;
        $('jobs-error').textContent = 'The server could not be reached; trying again…';
      }
      await sleep(backoff(attempt));
    }
    return false;
  }

  function expire(message) {
    stopWatching();
    stopBatch();
    batch = null;
    renderBatch();
    clearTimeout(expiryTimer);
    clearTimeout(listTimer);
    session = null;
    jobs.clear();
    order = [];
    selected = null;
    sessionStorage.removeItem(TOKEN_KEY);
    renderList();
    renderDetail();
    showSignin(message);
    announce(message);
  }

  // ---------------------------------------------------------------- pending requests

  function loadPending() {
    try {
      const list = JSON.parse(localStorage.getItem(scopeKey(PENDING_PREFIX)) || '[]');
      return Array.isArray(list) ? list.filter((e) => e && typeof e.key === 'string' && e.body) : [];
    } catch {
      return [];
    }
  }

  function savePending(list) {
    const k = scopeKey(PENDING_PREFIX);
    if (list.length) localStorage.setItem(k, JSON.stringify(list)); else localStorage.removeItem(k);
  }

  function removePending(key) {
    savePending(loadPending().filter((e) => e.key !== key));
  }

  // revisionsAsked is the list of revisions the form asks for: one, or
  // Revision through "Through revision"; a string says why it is no list.
  function revisionsAsked() {
    const from = Number($('revision').value);
    const to = $('revision-to').value === '' ? from : Number($('revision-to').value);
    if (!Number.isInteger(from) || !Number.isInteger(to) || to <= from) return [from];
    if (to - from + 1 > MAX_BATCH) return `At most ${MAX_BATCH} revisions at once.`;
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  }

  function updateRequestButton() {
    const revs = revisionsAsked();
    $('request').textContent = Array.isArray(revs) && revs.length > 1 ? `Request ${revs.length} reports` : 'Request report';
    $('request').disabled = !!sending;
    $('request').setAttribute('aria-busy', sending ? 'true' : 'false');
  }

  function requestStatus(msg, retrying) {
    $('request-status').textContent = msg;
    $('give-up').hidden = !retrying;
  }

  // One click of "Request report" is one logical request: its key is made
  // here, once, and written to localStorage before anything is sent.
  function onRequest(ev) {
    ev.preventDefault();
    if (sending) return; // a second click or Enter while sending reuses the request in flight
    const form = $('request-form');
    clearFieldErrors();
    if (!form.reportValidity()) return;
    const to = $('revision-to');
    if (to.value !== '' && Number(to.value) < Number($('revision').value)) {
      to.setCustomValidity('Through revision must be Revision or later.');
      to.reportValidity();
      to.setCustomValidity('');
      return;
    }
    const revs = revisionsAsked();
    if (!Array.isArray(revs)) {
      $('revision-to-error').textContent = revs;
      $('revision-to').setAttribute('aria-invalid', 'true');
      $('revision-to').focus();
      return;
    }
    const item = (revision) => ({
      type: 'permit_report',
      params: { case_id: Number($('case').value), revision, pages: Number($('pages').value) },
    });
    // Several revisions are one request too: one POST /v1/batches under
    // one key, made here once and resent unchanged on every retry.
    const entry = revs.length > 1
      ? { key: newKey(), batch: true, body: { jobs: revs.map(item) }, created: Date.now() }
      : { key: newKey(), body: item(revs[0]), created: Date.now() };
    savePending([...loadPending(), entry]);
    send(entry);
  }

  async function resumePending() {
    const now = Date.now();
    const list = loadPending();
    const fresh = list.filter((e) => now - e.created < PENDING_MAX_AGE_MS);
    if (fresh.length !== list.length) savePending(fresh);
    for (const entry of fresh) {
      if (!session) return;
      const items = entry.batch && Array.isArray(entry.body.jobs) ? entry.body.jobs : [entry.body];
      const p = (items[0] && items[0].params) || {};
      const last = (items[items.length - 1] && items[items.length - 1].params) || {};
      $('case').value = p.case_id ?? '';
      $('revision').value = p.revision ?? '';
      $('revision-to').value = entry.batch ? last.revision ?? '' : '';
      $('pages').value = p.pages ?? 10;
      updateRequestButton();
      await send(entry);
    }
  }

  // send delivers one pending request, retrying with the same key after a
  // network error, a 429 or a 5xx until the server answers it.
  async function send(entry) {
    if (sending) return;
    sending = entry;
    giveUp = false;
    sendPause = new AbortController();
    updateRequestButton();
    requestStatus('Sending the request…', false);
    let attempt = 0;
    try {
      for (;;) {
        if (!session) return; // kept in localStorage; sent again after the next sign-in
        if (giveUp) {
          removePending(entry.key);
          requestStatus('Stopped retrying. If the server received the request, the report appears in your list.', false);
          await loadJobs().catch(() => {});
          return;
        }
        let resp;
        try {
          resp = await api(entry.batch ? '/v1/batches' : '/v1/jobs', {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', 'Idempotency-Key': entry.key },
            body: JSON.stringify(entry.body),
          });
        } catch (e) {
          if (e instanceof AuthError) return;
          const wait = backoff(attempt++);
          requestStatus(`The server could not be reached; trying again in ${Math.ceil(wait / 1000)} s with the same request.`, true);
          await sleep(wait, sendPause.signal);
          continue;
        }
        if ((resp.status === 202 || resp.status === 200) && entry.batch) {
          const b = await resp.json();
          removePending(entry.key);
          const replayed = resp.headers.get('Idempotent-Replayed') === 'true';
          startBatch(b, entry.body.jobs);
          requestStatus(replayed ? 'The server already had this request; showing its reports.'
            : `${b.total} reports requested.`, false);
          announce(`${b.total} reports requested together.`);
          return;
        }
        if (resp.status === 202 || resp.status === 200) {
          const job = await resp.json();
          removePending(entry.key);
          upsertJob(job, true);
          select(job.id);
          const replayed = resp.headers.get('Idempotent-Replayed') === 'true';
          requestStatus(replayed ? 'The server already had this request; showing its report.' : 'Report requested.', false);
          announce(`Report requested: ${describe(job)}, ${stateWords(job)}.`);
          return;
        }
        if (resp.status === 429 || resp.status >= 500) {
          const wait = retryAfterMs(resp, backoff(attempt));
          attempt++;
          const why = resp.status === 429 ? 'Too many requests' : 'The server is busy';
          requestStatus(`${why}; trying again in ${Math.ceil(wait / 1000)} s with the same request.`, true);
          await sleep(wait, sendPause.signal);
          continue;
        }
        // The request itself was refused: this click is over.
        removePending(entry.key);
        showRequestProblem(await problemOf(resp));
        return;
      }
    } finally {
      if (sending === entry) sending = null;
      updateRequestButton();
    }
  }

  const FIELDS = { case_id: 'case', revision: 'revision', pages: 'pages' };
  const OTHER_FIELDS = ['revision-to'];

  function clearFieldErrors() {
    for (const id of [...Object.values(FIELDS), ...OTHER_FIELDS]) {
      $(`${id}-error`).textContent = '';
      $(id).removeAttribute('aria-invalid');
    }
  }

  function showRequestProblem(p) {
    let shown = false;
    for (const fe of p.errors || []) {
      const name = String(fe.field || '').split(/[./]/).pop();
      const id = FIELDS[name];
      if (id) {
        $(`${id}-error`).textContent = fe.message;
        $(id).setAttribute('aria-invalid', 'true');
        shown = true;
      }
    }
    const msg = `Not accepted: ${p.detail || p.title || 'the server refused the request'}.`;
    requestStatus(msg, false);
    announce(msg);
    if (shown) {
      const first = Object.values(FIELDS).find((id) => $(id).getAttribute('aria-invalid') === 'true');
      if (first) $(first).focus();
    }
  }

  // ---------------------------------------------------------------- job list

  function upsertJob(job, front) {
    const prev = jobs.get(job.id);
    jobs.set(job.id, job);
    if (!prev) {
      if (front) order.unshift(job.id); else order.push(job.id);
    }
    renderRow(job);
    if (job.id === selected) renderDetail(prev);
    if (inBatch(job.id)) renderBatch(job.id);
  }

  async function loadJobs() {
    clearTimeout(listTimer);
    const resp = await api('/v1/jobs?limit=20');
    if (!resp.ok) {
      const p = await problemOf(resp);
      const msg = `Could not load your reports: ${p.detail || p.title}.`;
      if (session && !$('app').hidden) $('jobs-error').textContent = msg; else $('signin-error').textContent = msg;
      return false;
    }
    const page = await resp.json();
    $('jobs-error').textContent = '';
    const fresh = new Map(page.jobs.map((j) => [j.id, j]));
    // The live view and the batch's stream may know a newer state than the
    // list read; keep it. A batch's jobs stay known past the first page.
    for (const id of [selected, ...(batch ? batch.ids : [])]) {
      if (!id || !jobs.has(id)) continue;
      const mine = jobs.get(id);
      if (!fresh.has(id) || newer(mine, fresh.get(id))) fresh.set(id, mine);
    }
    jobs.clear();
    for (const [id, j] of fresh) jobs.set(id, j);
    order = page.jobs.map((j) => j.id);
    renderList();
    renderBatch();
    // The stream of a batch keeps its jobs current: the list is not polled for them.
    if (page.jobs.some((j) => !TERMINAL.has(j.state) && j.id !== selected && !inBatch(j.id))) scheduleList(LIST_REFRESH_MS);
    return true;
  }

  // Jobs other than the watched one are refreshed with the list, slowly,
  // and only while the tab is visible.
  function scheduleList(ms) {
    clearTimeout(listTimer);
    if (document.hidden || !session) return;
    listTimer = setTimeout(() => {
      loadJobs().then((ok) => { if (!ok) scheduleList(LIST_REFRESH_MS); }, () => scheduleList(LIST_REFRESH_MS));
    }, ms);
  }

  function renderList() {
    const ul = $('jobs');
    ul.replaceChildren();
    for (const id of order) {
      const li = document.createElement('li');
      li.id = `row-${id}`;
      ul.append(li);
      renderRow(jobs.get(id));
    }
    $('jobs-empty').hidden = order.length > 0;
  }

  function renderRow(job) {
    const li = $(`row-${job.id}`);
    if (!li) {
      if (order.includes(job.id)) renderList();
      return;
    }
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'job-row';
    b.dataset.id = job.id;
    if (job.id === selected) b.setAttribute('aria-current', 'true');
    const badge = document.createElement('span');
    badge.className = `badge state-${job.state}`;
    badge.textContent = stateWords(job);
    const what = document.createElement('span');
    what.className = 'what';
    what.textContent = describe(job);
    const when = document.createElement('time');
    when.dateTime = job.created_at;
    when.textContent = fmtTime(job.created_at);
    b.append(badge, what, when);
    b.setAttribute('aria-label', `${describe(job)}, ${stateWords(job)}, requested ${fmtTime(job.created_at)}`);
    const hadFocus = li.contains(document.activeElement);
    li.replaceChildren(b);
    if (hadFocus) b.focus();
  }

  // ---------------------------------------------------------------- live view

  // newer reports whether a is a later version of a job than b: further
  // on, or as far and changed no earlier (a stand-in has no time: it is oldest).
  function newer(a, b) {
    if (rank(a.state) !== rank(b.state)) return rank(a.state) > rank(b.state);
    return (Date.parse(a.updated_at) || 0) >= (Date.parse(b.updated_at) || 0);
  }

  function select(id) {
    if (selected === id && (watcher || inBatch(id))) return;
    const prev = selected;
    selected = id;
    if (session) localStorage.setItem(scopeKey(VIEW_PREFIX), id);
    if (prev && jobs.has(prev)) renderRow(jobs.get(prev));
    if (jobs.has(id)) renderRow(jobs.get(id));
    renderDetail();
    stopWatching();
    const job = jobs.get(id);
    // A job of the watched batch is kept current by the batch's one stream.
    if (job && !TERMINAL.has(job.state) && !inBatch(id)) {
      watcher = new Watcher(id);
      watcher.start();
    }
  }

  // linkedJob is the job id of a `#job=<id>` deep link, or null.
  function linkedJob() {
    const m = /^#(?:.*&)?job=([A-Za-z0-9_-]{1,64})(?:&|$)/.exec(location.hash);
    return m ? m[1] : null;
  }

  // After a reload or reopen: the job of a deep link, else the job that was
  // in view, else the newest one still running, else the newest one.
  async function restoreView() {
    const linked = linkedJob();
    if (linked) {
      // Used once: from here on the view is remembered as usual.
      history.replaceState(null, '', location.pathname + location.search);
    }
    const saved = linked || localStorage.getItem(scopeKey(VIEW_PREFIX));
    if (saved && !jobs.has(saved)) {
      // Older than the first page of the list: read it directly.
      try {
        const resp = await api(`/v1/jobs/${encodeURIComponent(saved)}`);
        if (resp.ok) upsertJob(await resp.json(), false);
      } catch (e) {
        if (e instanceof AuthError) return;
      }
    }
    if (saved && jobs.has(saved)) return select(saved);
    if (linked) $('jobs-error').textContent = 'The report in that link is not visible to this sign-in.';
    const running = order.find((id) => !TERMINAL.has(jobs.get(id).state));
    const pick = running || order[0];
    if (pick) select(pick); else renderDetail();
  }

  function stopWatching() {
    if (watcher) watcher.stop();
    watcher = null;
  }

  function liveStatus(msg) {
    $('job-live').textContent = msg;
  }

  // renderDetail shows the selected job; prev is its earlier version, used
  // to announce a change of state once.
  function renderDetail(prev) {
    const job = selected ? jobs.get(selected) : null;
    $('job').hidden = !job;
    $('job-none').hidden = !!job;
    if (!job) return;
    const view = $('view');
    view.dataset.jobId = job.id;
    view.dataset.state = job.state;
    const badge = $('job-state');
    badge.className = `badge state-${job.state}`;
    badge.textContent = stateWords(job);
    $('job-title').textContent = describe(job);
    $('job-id').textContent = job.id;

    const bar = $('job-progress');
    const total = job.progress ? job.progress.total : (job.params && job.params.pages) || 0;
    let done = job.progress ? job.progress.done : 0;
    if (job.state === 'succeeded') done = total;
    bar.max = Math.max(total, 1);
    if (job.state === 'running' && !job.progress) {
      bar.removeAttribute('value'); // indeterminate
    } else {
      bar.value = done;
    }
    const unit = (job.progress && job.progress.unit) || 'pages';
    $('job-progress-text').textContent = total ? `${done} of ${total} ${unit}` : '';
    bar.setAttribute('aria-valuetext', total ? `${done} of ${total} ${unit}` : stateWords(job));

    setTime($('job-created'), job.created_at);
    setTime($('job-started'), job.started_at);
    setTime($('job-finished'), job.finished_at);
    setTime($('job-updated'), job.updated_at);
    $('job-attempt').textContent = job.attempt ? String(job.attempt) +
      (job.retry_at && job.state === 'running' ? ` (next attempt at ${fmtTime(job.retry_at)})` : '') : '—';

    const failed = job.state === 'failed' && job.error;
    $('job-error').hidden = !failed;
    if (failed) {
      $('job-error-category').textContent = job.error.category;
      $('job-error-message').textContent = job.error.message + (job.error.retryable ? ' You can request it again.' : '');
    }
    if (job.state === 'canceled') {
      $('job-error').hidden = false;
      $('job-error-category').textContent = 'canceled';
      $('job-error-message').textContent = 'This report was canceled before it finished.';
    }

    const ready = job.state === 'succeeded' && job.result;
    $('download').disabled = !ready;
    $('download').textContent = ready ? `Download ${resultKind(job.result.content_type).label}` : 'Download';
    $('job-size').textContent = ready ? `${fmtSize(job.result.size)} · ${job.result.content_type}` : '';
    if (TERMINAL.has(job.state)) liveStatus('');

    if (prev && prev.state !== job.state) {
      if (job.state === 'succeeded') announce(`Report ready: ${describe(job)}. Download it with the ${$('download').textContent} button.`);
      else if (job.state === 'failed') announce(`Report failed (${job.error ? job.error.category : 'unknown'}): ${describe(job)}.`);
      else announce(`Report ${stateWords(job)}: ${describe(job)}.`);
    }
  }

  // readEvents reads a text/event-stream body and calls dispatch(event,
  // data, id) for each event until the body ends or dispatch returns true.
  async function readEvents(body, dispatch) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let data = [];
    let event = '';
    let id = null;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += value;
        for (;;) {
          const m = /\r\n|\r|\n/.exec(buf);
          if (!m) break;
          if (m[0] === '\r' && m.index === buf.length - 1) break; // maybe half of \r\n
          const line = buf.slice(0, m.index);
          buf = buf.slice(m.index + m[0].length);
          if (line === '') {
            if (data.length && dispatch(event || 'message', data.join('\n'), id)) return;
            data = [];
            event = '';
            continue;
          }
          if (line.startsWith(':')) continue; // keep-alive comment
          const c = line.indexOf(':');
          const field = c < 0 ? line : line.slice(0, c);
          let val = c < 0 ? '' : line.slice(c + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (field === 'data') data.push(val);
          else if (field === 'event') event = val;
          else if (field === 'id') id = val;
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  // Watcher keeps one job's view current: Server-Sent Events read with
  // fetch (EventSource cannot send the Authorization header, and the token
  // must never go into a URL), paused while the tab is hidden and resumed
  // with Last-Event-ID; polling with ETag and Retry-After when the stream
  // keeps failing.
  class Watcher {
    constructor(id) {
      this.id = id;
      this.lastEventId = '';
      this.etag = '';
      this.mode = 'stream';
      this.failures = 0;
      this.stopped = false;
      this.running = false;
      this.ctrl = null;
    }

    start() {
      if (this.stopped || this.running || document.hidden) return;
      this.running = true;
      this.loop().catch(() => {}).finally(() => { this.running = false; });
    }

    pause() {
      if (this.ctrl) this.ctrl.abort();
      if (!this.stopped) liveStatus('Live updates paused while this tab is hidden.');
    }

    stop() {
      this.stopped = true;
      if (this.ctrl) this.ctrl.abort();
    }

    done() {
      const job = jobs.get(this.id);
      return this.stopped || !job || TERMINAL.has(job.state);
    }

    async loop() {
      while (!this.done() && !document.hidden) {
        this.ctrl = new AbortController();
        const signal = this.ctrl.signal;
        let delay;
        try {
          delay = this.mode === 'stream' ? await this.stream(signal) : await this.poll(signal);
        } catch (e) {
          if (e instanceof AuthError) return;
          if (signal.aborted) continue; // paused or stopped: the loop condition decides
          this.failures++;
          if (this.mode === 'stream' && this.failures >= 3) {
            this.mode = 'poll';
            this.failures = 0;
          }
          delay = backoff(this.failures);
          liveStatus(`Connection lost; trying again in ${Math.ceil(delay / 1000)} s.`);
        }
        if (this.done()) break;
        if (delay > 0) await sleep(delay, signal);
      }
      if (this.done() && !this.stopped) {
        liveStatus('');
        loadJobs().catch(() => {}); // other rows may have moved on too
      }
    }

    // stream reads the event stream until it ends; it returns how long to
    // wait before the next connection.
    async stream(signal) {
      const headers = { Accept: 'text/event-stream' };
      if (this.lastEventId) headers['Last-Event-ID'] = this.lastEventId;
      const resp = await api(`/v1/jobs/${encodeURIComponent(this.id)}/events`, { headers, signal });
      if (resp.status === 404) return this.gone();
      if (resp.status === 429 || resp.status === 503) return retryAfterMs(resp, 2000);
      if (resp.status === 204) {
        // Terminal and its terminal event already seen: one read ends it.
        this.mode = 'poll';
        return 0;
      }
      const ct = resp.headers.get('Content-Type') || '';
      if (!resp.ok || !ct.startsWith('text/event-stream') || !resp.body) {
        throw new Error(`no event stream (HTTP ${resp.status})`);
      }
      liveStatus('Live updates on.');
      await readEvents(resp.body, (event, data, id) => { this.dispatch(event, data, id); return false; });
      // The server ends the stream after a terminal state; any other end
      // (a restart, a proxy) is resumed from the last event id.
      return this.done() ? 0 : 1000;
    }

    dispatch(event, data, id) {
      if (event === 'problem') throw new Error(`event stream problem: ${data}`);
      if (event !== 'job') return;
      const job = JSON.parse(data);
      if (job.id !== this.id) return;
      if (id !== null) this.lastEventId = id;
      this.failures = 0;
      upsertJob(job, false);
    }

    async poll(signal) {
      const headers = {};
      if (this.etag) headers['If-None-Match'] = this.etag;
      const resp = await api(`/v1/jobs/${encodeURIComponent(this.id)}`, { headers, signal });
      if (resp.status === 404) return this.gone();
      if (resp.status === 304) {
        const wait = retryAfterMs(resp, 2000);
        liveStatus(`Checking for changes every ${Math.ceil(wait / 1000)} s.`);
        return wait;
      }
      if (resp.status === 429 || resp.status >= 500) return retryAfterMs(resp, 2000);
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      this.etag = resp.headers.get('ETag') || '';
      upsertJob(await resp.json(), false);
      this.failures = 0;
      const wait = retryAfterMs(resp, 2000);
      if (!this.done()) liveStatus(`Checking for changes every ${Math.ceil(wait / 1000)} s.`);
      return wait;
    }

    gone() {
      this.stopped = true;
      liveStatus('This report is no longer visible to you.');
      return 0;
    }
  }

  // ---------------------------------------------------------------- batch

  // Several revisions requested at once are one batch (POST /v1/batches),
  // watched in one view over one stream: GET /v1/events carries every change
  // of this reviewer's jobs, however many, and holds one of their stream slots.

  function inBatch(id) {
    return !!batch && batch.set.has(id);
  }

  function batchDone() {
    return !!batch && batch.ids.every((id) => { const j = jobs.get(id); return j && TERMINAL.has(j.state); });
  }

  function saveBatch() {
    if (!session) return;
    const k = scopeKey(BATCH_PREFIX);
    if (batch) sessionStorage.setItem(k, JSON.stringify({ id: batch.id, ids: batch.ids, items: batch.items, created: batch.created, last: batch.last }));
    else sessionStorage.removeItem(k);
  }

  // A stand-in is a batch job the page has not read yet: what it asked for,
  // with the state the batch said; the stream or a read replaces it.
  function standIn(id, state, item, created) {
    const it = item && typeof item === 'object' ? item : {};
    return { id, type: String(it.type || 'permit_report'), params: it.params && typeof it.params === 'object' ? it.params : {}, state: state || 'queued', created_at: created };
  }

  function adoptBatch(id, ids, items, created, last) {
    batch = { id, ids, set: new Set(ids), items, created, last: last || '' };
    ids.forEach((jid, i) => { if (!jobs.has(jid)) jobs.set(jid, standIn(jid, 'queued', items[i], created)); });
    renderBatch();
  }

  // startBatch shows a batch the server just accepted (b is its resource,
  // items what was sent) and watches it.
  function startBatch(b, items) {
    stopBatch();
    const ids = (b.jobs || []).map((j) => String(j.id));
    adoptBatch(String(b.id), ids, Array.isArray(items) ? items : [], b.created_at, '');
    (b.jobs || []).forEach((j) => {
      const known = jobs.get(String(j.id));
      if (known && rank(j.state) > rank(known.state)) jobs.set(known.id, { ...known, state: j.state });
    });
    saveBatch();
    renderBatch();
    if (ids.length) select(ids[0]);
    loadJobs().catch(() => {});
    watchBatch(false);
  }

  // restoreBatch finds the batch this tab watched before a reload.
  function restoreBatch() {
    if (batch) return;
    let saved = null;
    try {
      saved = JSON.parse(sessionStorage.getItem(scopeKey(BATCH_PREFIX)) || 'null');
    } catch {
      saved = null;
    }
    if (!saved || typeof saved.id !== 'string' || !Array.isArray(saved.ids) || !saved.ids.every((x) => typeof x === 'string')) return;
    adoptBatch(saved.id, saved.ids, Array.isArray(saved.items) ? saved.items : [], saved.created, typeof saved.last === 'string' ? saved.last : '');
    watchBatch(true);
  }

  function watchBatch(readFirst) {
    if (feed) feed.stop();
    feed = new Feed(readFirst);
    feed.start();
  }

  function stopBatch() {
    if (feed) feed.stop();
    feed = null;
  }

  function closeBatch() {
    stopBatch();
    batch = null;
    saveBatch();
    renderBatch();
    // A job still running in the live view now needs a watcher of its own.
    const s = selected;
    selected = null;
    if (s && jobs.has(s)) select(s); else renderDetail();
  }

  function batchLive(msg) {
    $('batch-live').textContent = msg;
  }

  // applyJob takes a job resource from the stream or a read: a later
  // version of a job the page shows replaces it.
  function applyJob(job) {
    if (!job || typeof job.id !== 'string') return;
    const prev = jobs.get(job.id);
    if (!prev || !newer(job, prev)) return;
    jobs.set(job.id, job);
    renderRow(job);
    if (job.id === selected) renderDetail(prev);
    if (inBatch(job.id)) renderBatch(job.id);
  }

  // syncBatch reads the batch and catches up with what changed before the
  // stream started; a job found further on is read in full.
  async function syncBatch(signal) {
    const b = batch;
    const resp = await api(`/v1/batches/${encodeURIComponent(b.id)}?limit=${MAX_BATCH}`, { signal });
    if (batch !== b) return;
    if (resp.status === 404) {
      batch = null;
      saveBatch();
      renderBatch();
      if (feed) feed.stop();
      $('request-status').textContent = 'The batch of reports is no longer visible to you.';
      return;
    }
    if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
    const res = await resp.json();
    if (batch !== b) return;
    const behind = (res.jobs || []).filter((it) => {
      const known = jobs.get(String(it.id));
      return known && inBatch(known.id) && rank(it.state) > rank(known.state);
    }).map((it) => String(it.id));
    const next = behind.values();
    const reader = async () => {
      for (const id of next) {
        const r = await api(`/v1/jobs/${encodeURIComponent(id)}`, { signal });
        if (r.ok) applyJob(await r.json());
      }
    };
    await Promise.all(Array.from({ length: Math.min(8, behind.length) }, reader));
  }

  // renderBatch shows the batch: every row, or only the row of the job id
  // when only that job changed.
  function renderBatch(id) {
    const sec = $('batch');
    sec.hidden = !batch;
    if (!batch) {
      $('batch-jobs').replaceChildren();
      delete sec.dataset.batchId;
      delete sec.dataset.done;
      batchLive('');
      return;
    }
    const ul = $('batch-jobs');
    if (!id || ul.childElementCount !== batch.ids.length) {
      ul.replaceChildren();
      for (const jid of batch.ids) {
        const li = document.createElement('li');
        li.dataset.id = jid;
        ul.append(li);
        renderBatchRow(li, jid);
      }
    } else if (id) {
      const li = ul.children[batch.ids.indexOf(id)];
      if (li) renderBatchRow(li, id);
    }
    let done = 0;
    let failed = 0;
    for (const jid of batch.ids) {
      const j = jobs.get(jid);
      if (j && TERMINAL.has(j.state)) done++;
      if (j && j.state !== 'succeeded' && TERMINAL.has(j.state)) failed++;
    }
    sec.dataset.batchId = batch.id;
    sec.dataset.done = String(done === batch.ids.length);
    const bar = $('batch-progress');
    bar.max = Math.max(batch.ids.length, 1);
    bar.value = done;
    const words = `${done} of ${batch.ids.length} finished` + (failed ? `, ${failed} not ready` : '');
    $('batch-summary').textContent = words;
    bar.setAttribute('aria-valuetext', words);
  }

  function renderBatchRow(li, id) {
    const job = jobs.get(id);
    if (!job) return;
    li.dataset.state = job.state;
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'job-row';
    b.dataset.id = id;
    if (id === selected) b.setAttribute('aria-current', 'true');
    const badge = document.createElement('span');
    badge.className = `badge state-${job.state}`;
    badge.textContent = stateWords(job);
    const what = document.createElement('span');
    what.className = 'what';
    what.textContent = describe(job);
    const how = document.createElement('span');
    how.className = 'help';
    const p = job.progress;
    how.textContent = p && !TERMINAL.has(job.state) ? `${p.done} of ${p.total} ${p.unit || 'pages'}` : (job.state === 'succeeded' ? 'ready to download' : '');
    b.append(badge, what, how);
    b.setAttribute('aria-label', `${describe(job)}, ${stateWords(job)}`);
    const hadFocus = li.contains(document.activeElement);
    li.replaceChildren(b);
    if (hadFocus) b.focus();
  }

  // Feed follows GET /v1/events for the batch: read with fetch (the token
  // goes in the Authorization header, never in a URL), resumed with
  // Last-Event-ID after a reload, a hidden tab or a lost connection, and
  // closed once every job of the batch is finished.
  class Feed {
    constructor(readFirst) {
      this.readFirst = readFirst; // a restored batch: read it before opening a stream
      this.failures = 0;
      this.stopped = false;
      this.running = false;
      this.ctrl = null;
    }

    start() {
      if (this.stopped || this.running || document.hidden) return;
      this.running = true;
      this.loop().catch(() => {}).finally(() => { this.running = false; });
    }

    pause() {
      if (this.ctrl) this.ctrl.abort();
      if (!this.stopped) batchLive('Live updates paused while this tab is hidden.');
    }

    stop() {
      this.stopped = true;
      if (this.ctrl) this.ctrl.abort();
    }

    done() {
      return this.stopped || feed !== this || batchDone();
    }

    async loop() {
      while (!this.done() && !document.hidden) {
        this.ctrl = new AbortController();
        const signal = this.ctrl.signal;
        let delay;
        try {
          if (this.readFirst) {
            await syncBatch(signal);
            this.readFirst = false;
            if (this.done()) break;
          }
          delay = await this.stream(signal);
        } catch (e) {
          if (e instanceof AuthError) return;
          if (signal.aborted) continue; // paused or stopped: the loop condition decides
          this.failures++;
          delay = backoff(this.failures);
          batchLive(`Connection lost; trying again in ${Math.ceil(delay / 1000)} s.`);
        }
        if (this.done()) break;
        if (delay > 0) await sleep(delay, signal);
      }
      if (!this.stopped && feed === this && batchDone()) {
        this.stopped = true;
        batchLive('');
        let ok = 0;
        for (const id of batch.ids) if (jobs.get(id).state === 'succeeded') ok++;
        announce(`All ${batch.ids.length} reports finished: ${ok} ready.`);
        loadJobs().catch(() => {});
      }
    }

    // stream reads the requester stream until the batch is done or the
    // stream ends; it returns how long to wait before the next connection.
    async stream(signal) {
      const headers = { Accept: 'text/event-stream' };
      if (batch.last) headers['Last-Event-ID'] = batch.last;
      const resp = await api('/v1/events', { headers, signal });
      if (resp.status === 429 || resp.status === 503) return retryAfterMs(resp, 2000);
      if (resp.status === 204) { // nothing more will come: read where the batch is
        await syncBatch(signal);
        return 2000;
      }
      const ct = resp.headers.get('Content-Type') || '';
      if (!resp.ok || !ct.startsWith('text/event-stream') || !resp.body) {
        throw new Error(`no event stream (HTTP ${resp.status})`);
      }
      try {
        // Without an event id the stream starts now: what changed between
        // the admission (or the last read) and now is read once.
        if (!batch.last) await syncBatch(signal);
        if (this.done()) return 0;
        batchLive('Live updates on.');
        this.failures = 0;
        await readEvents(resp.body, (event, data, id) => this.dispatch(event, data, id));
      } finally {
        resp.body.cancel().catch(() => {});
      }
      return this.done() ? 0 : 1000;
    }

    dispatch(event, data, id) {
      if (event === 'problem') throw new Error(`event stream problem: ${data}`);
      if (event !== 'job' || !batch) return this.done();
      if (id !== null) {
        batch.last = id;
        saveBatch();
      }
      this.failures = 0;
      applyJob(JSON.parse(data));
      return this.done();
    }
  }

  // ---------------------------------------------------------------- download

  // The download uses the result's short-lived signed link from a fresh
  // read of the job; the bearer token itself never leaves the headers.
  async function download() {
    const id = selected;
    $('download-error').textContent = '';
    $('download').disabled = true;
    try {
      const resp = await api(`/v1/jobs/${encodeURIComponent(id)}`);
      if (!resp.ok) {
        const p = await problemOf(resp);
        throw new Error(p.detail || p.title);
      }
      const job = await resp.json();
      upsertJob(job, false);
      if (!job.result || !job.result.href) throw new Error('the report has no file');
      const a = document.createElement('a');
      a.href = job.result.href;
      a.download = resultFileName(job);
      a.rel = 'noopener';
      a.hidden = true;
      document.body.append(a);
      a.click();
      a.remove();
      announce('Download started.');
    } catch (e) {
      if (e instanceof AuthError) return;
      $('download-error').textContent = `Could not download: ${e.message}.`;
    } finally {
      const job = jobs.get(id);
      $('download').disabled = !(job && job.state === 'succeeded' && job.result);
    }
  }

  // ---------------------------------------------------------------- wiring

  function onVisibility() {
    if (!session) return;
    if (document.hidden) {
      clearTimeout(listTimer);
      if (watcher) watcher.pause();
      if (feed) feed.pause();
    } else {
      if (watcher) watcher.start();
      if (feed) feed.start();
      loadJobs().catch(() => {});
    }
  }

  async function onDevSignin(ev) {
    ev.preventDefault();
    const form = $('dev-form');
    if (!form.reportValidity()) return;
    $('signin-error').textContent = '';
    $('dev-signin').disabled = true;
    try {
      const resp = await fetch('/dev/token', {
        method: 'POST',
        body: new URLSearchParams(new FormData(form)),
        cache: 'no-store',
        credentials: 'omit',
      });
      if (!resp.ok) {
        const p = await problemOf(resp);
        $('signin-error').textContent = `Development sign-in refused: ${p.detail || p.title}.`;
        return;
      }
      const t = await resp.json();
      await signIn(t.token);
    } catch {
      $('signin-error').textContent = 'The server could not be reached. Try again.';
    } finally {
      $('dev-signin').disabled = false;
    }
  }

  function init() {
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      $('signin-error').textContent = '';
      signIn($('token').value);
    });
    $('dev-form').addEventListener('submit', onDevSignin);
    $('request-form').addEventListener('submit', onRequest);
    // The second click of a double click (detail 2, 3, ...) repeats the
    // first one's intent: it must not become a second request, even when the
    // first was answered between the two clicks and the button is enabled again.
    $('request').addEventListener('click', (ev) => { if (ev.detail > 1) ev.preventDefault(); });
    $('give-up').addEventListener('click', () => {
      giveUp = true;
      if (sendPause) sendPause.abort();
    });
    $('refresh').addEventListener('click', () => loadJobs().catch(() => {}));
    $('revision').addEventListener('input', updateRequestButton);
    $('revision-to').addEventListener('input', updateRequestButton);
    $('batch-close').addEventListener('click', closeBatch);
    $('batch-jobs').addEventListener('click', (ev) => {
      const b = ev.target.closest('button.job-row');
      if (b) select(b.dataset.id);
    });
    $('download').addEventListener('click', download);
    $('signout').addEventListener('click', () => expire('Signed out.'));
    $('jobs').addEventListener('click', (ev) => {
      const b = ev.target.closest('button.job-row');
      if (b) select(b.dataset.id);
    });
    document.addEventListener('visibilitychange', onVisibility);
    window.addEventListener('hashchange', () => { if (session && linkedJob()) restoreView(); });

    const stored = sessionStorage.getItem(TOKEN_KEY);
    const s = stored && parseToken(stored);
    if (s && s.exp > Date.now()) {
      session = s;
      enter(false);
    } else {
      sessionStorage.removeItem(TOKEN_KEY);
      showSignin('');
    }
  }

  init();
})();
