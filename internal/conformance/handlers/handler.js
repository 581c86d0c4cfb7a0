// The conformance suite's endpoint handler on Node (docs/conformance.md,
// "Endpoint types"): node's own http and crypto modules only, so it runs on
// any node 18.17+ with nothing installed. The same environment, modes and
// printed events as handler.py beside it.
"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");

const LABEL = process.env.CONF_LABEL;
const GATES = process.env.CONF_GATES;
const SECRETS = JSON.parse(fs.readFileSync(process.env.CONF_SECRETS, "utf8"));
const inFlight = new Map(); // job id -> the responses of its requests whose connections are open

function say(event, fields) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + "\n");
}

// verify is Standard Webhooks by hand (docs/endpoints.md): any of the
// signatures, under any of the secrets, over id.timestamp.body.
function verify(secrets, headers, body) {
  const id = headers["webhook-id"] || "";
  const ts = headers["webhook-timestamp"] || "";
  if (!/^\d+$/.test(ts) || Math.abs(Date.now() / 1000 - Number(ts)) > 300) return false;
  for (const secret of secrets) {
    const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
    const want = crypto.createHmac("sha256", key).update(Buffer.concat([Buffer.from(`${id}.${ts}.`), body])).digest();
    for (const sig of (headers["webhook-signature"] || "").split(" ")) {
      const [version, value] = sig.split(",");
      const got = Buffer.from(value || "", "base64");
      if (version === "v1" && got.length === want.length && crypto.timingSafeEqual(got, want)) return true;
    }
  }
  return false;
}

function expectedResult(blocks, tail, seed) {
  const parts = [];
  for (let i = 0; i < blocks; i++) {
    parts.push(Buffer.from(`${i} ${seed} ü€\n`));
    const b = Buffer.alloc(1000);
    for (let k = 0; k < 1000; k++) b[k] = (i * 7 + k * 13 + seed) & 255;
    parts.push(b);
  }
  const t = Buffer.alloc(tail);
  for (let k = 0; k < tail; k++) t[k] = (k * 31 + seed) & 255;
  parts.push(t);
  return Buffer.concat(parts);
}

const gateOpen = (name) => Boolean(name) && fs.existsSync(path.join(GATES, name)); // no gate: never open
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// callback sends one callback, prints its answer and returns the status.
async function callback(job, url, op, body, method = "POST", contentType = "application/json") {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    init.headers["Content-Type"] = contentType;
  }
  let status = 0;
  let canceled = false;
  try {
    const resp = await fetch(`${url}/${op}`, init);
    status = resp.status;
    const text = await resp.text();
    if (status >= 400 && text) canceled = Boolean(JSON.parse(text).canceled);
  } catch (e) {
    process.stderr.write(`callback ${op}: ${e}\n`);
  }
  say("callback", { id: job.id, attempt: job.attempt, op, status, canceled });
  return status;
}

// runAsync is a 202's work: beats with progress while the gate is shut,
// then the result, then done. late: the attempt's time runs out first.
async function runAsync(job, url, params, late) {
  if ((await callback(job, url, "beat", { progress: { done: 1, total: 2, unit: "steps" } })) !== 204) return;
  let last = Date.now();
  while (!gateOpen(params.gate)) {
    await sleep(50);
    if (!late && Date.now() - last > 1000) {
      if ((await callback(job, url, "beat")) !== 204) return; // canceled or lost: stop
      last = Date.now();
    }
  }
  if ((await callback(job, url, "beat", { progress: { done: 2, total: 2, unit: "steps" } })) !== 204 && !late) return;
  const text = `done by ${LABEL} at attempt ${job.attempt}\n`;
  if ((await callback(job, url, "result", text, "PUT", "text/plain")) !== 204 && !late) return;
  await callback(job, url, "done");
}

function answer(res, status, body = "", headers = {}) {
  res.writeHead(status, { ...headers, "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

async function handle(req, res, job, params, url) {
  const n = job.attempt;
  const done = `done by ${LABEL} at attempt ${n}\n`;
  switch (params.mode) {
    case "result":
      return answer(res, 200, expectedResult(params.blocks, params.tail, params.seed), { "Content-Type": "application/octet-stream" });
    case "hold": {
      let gone = false;
      res.on("close", () => {
        if (!res.writableFinished) gone = true;
      });
      // The job's gate, or its gate for this attempt alone.
      while (!gateOpen(params.gate) && !(params.gate && gateOpen(`${params.gate}.a${n}`))) {
        if (gone) {
          say("aborted", { id: job.id, attempt: n });
          return;
        }
        await sleep(50);
      }
      answer(res, 200, done, { "Content-Type": "text/plain" });
      say("answered", { id: job.id, attempt: n, status: 200 });
      return;
    }
    case "permanent": {
      const problem = { type: "about:blank", title: "Rejected", status: 422, detail: params.message };
      return answer(res, 422, JSON.stringify(problem), { "Content-Type": "application/problem+json" });
    }
    case "flaky":
      return n === 1 ? answer(res, 503, "", { "Retry-After": "1" }) : answer(res, 200, done, { "Content-Type": "text/plain" });
    case "async":
    case "late":
      if (params.mode === "late" && n > 1) return answer(res, 200, done, { "Content-Type": "text/plain" });
      answer(res, 202);
      runAsync(job, url, params, params.mode === "late");
      return;
  }
  return answer(res, 400, "unknown mode");
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    const body = Buffer.concat(chunks);
    const secrets = SECRETS[req.url];
    if (req.method !== "POST" || !secrets || !verify(secrets, req.headers, body)) {
      say("refused", { path: req.url });
      const problem = { type: "about:blank", title: "Unauthorized", status: 401, detail: "not signed by jobgate" };
      return answer(res, 401, JSON.stringify(problem), { "Content-Type": "application/problem+json" });
    }
    const msg = JSON.parse(body.toString("utf8"));
    const job = msg.job;
    const trace = (req.headers.traceparent || "").split("-");
    // The job's other requests still open as this one arrives (one whose
    // caller closed it counts no more).
    const live = new Set([...(inFlight.get(job.id) || [])].filter((r) => r.socket && !r.socket.destroyed && !r.socket.readableEnded));
    live.add(res);
    inFlight.set(job.id, live);
    const now = live.size;
    say("started", {
      id: job.id, type: job.type, attempt: job.attempt, mode: job.params.mode, webhook_id: req.headers["webhook-id"],
      trace_id: trace.length === 4 ? trace[1] : "", in_flight: now, callback: Boolean(msg.callback),
    });
    try {
      await handle(req, res, job, job.params, msg.callback || "");
    } finally {
      inFlight.get(job.id).delete(res);
    }
  });
});

server.listen(Number(process.env.CONF_PORT), "127.0.0.1", () => say("ready", { port: server.address().port }));
