// The handler of an endpoint type (docs/endpoints.md) on Node's plain http
// module: jobgate POSTs each attempt of a "greeting_node" job here, signed
// with the type's secret as Standard Webhooks (verified with npm's
// standardwebhooks), and the answer is the job's outcome.
//
//   JOBGATE_ENDPOINT_SECRET=whsec_... PORT=9092 node examples/endpoint-node/server.js
"use strict";

const http = require("node:http");
const { Webhook } = require("standardwebhooks");

const GREETINGS = { en: "Hello", fr: "Bonjour", de: "Hallo" };
const MAX_BODY = 64 * 1024; // an attempt's body is its params: small

// Several secrets, space separated, while a rotation lasts (jobgate signs
// with both for 24 hours).
const secrets = (process.env.JOBGATE_ENDPOINT_SECRET || "").split(/\s+/).filter(Boolean);
if (secrets.length === 0) {
  console.error("set JOBGATE_ENDPOINT_SECRET to the secret `jobgate types apply` printed");
  process.exit(2);
}
const webhooks = secrets.map((s) => new Webhook(s));

function problem(res, status, detail) {
  res.writeHead(status, { "Content-Type": "application/problem+json" });
  res.end(JSON.stringify({ type: "about:blank", title: "Rejected", status, detail }));
}

// verify answers the request's attempt, or null when no secret signed it
// (or its timestamp is more than 5 minutes from this clock).
function verify(body, headers) {
  for (const wh of webhooks) {
    try {
      return wh.verify(body, headers);
    } catch {
      // not this secret: try the next one
    }
  }
  return null;
}

function greet(res, job) {
  const { name, language } = job.params; // validated against types.yaml's schema, defaults applied
  const word = GREETINGS[language];
  if (!word) {
    // A 4xx: the job fails at once (endpoint_rejected); its owner reads the detail.
    return problem(res, 422, `no greeting in ${JSON.stringify(language)} yet`);
  }
  if (name.toLowerCase() === "later") {
    // A 5xx: jobgate tries again, not before Retry-After.
    res.writeHead(503, { "Retry-After": "5" });
    return res.end();
  }
  // 200: the body is the job's result, stored with the type's content type.
  res.writeHead(200, { "Content-Type": "text/plain; charset=utf-8" });
  res.end(`${word}, ${name}! (job ${job.id}, attempt ${job.attempt})\n`);
}

const server = http.createServer((req, res) => {
  if (req.method !== "POST" || req.url !== "/jobs/greeting") {
    return problem(res, 404, "jobgate posts to /jobs/greeting");
  }
  const chunks = [];
  let size = 0;
  req.on("data", (c) => {
    size += c.length;
    if (size > MAX_BODY) {
      problem(res, 413, "the body is larger than an attempt's");
      req.destroy();
      return;
    }
    chunks.push(c);
  });
  req.on("end", () => {
    // The exact bytes received: the signature covers them.
    const msg = verify(Buffer.concat(chunks).toString("utf8"), req.headers);
    if (!msg || !msg.job) {
      return problem(res, 401, "the request is not signed with this endpoint's secret");
    }
    greet(res, msg.job);
  });
});

server.listen(Number(process.env.PORT ?? 9092), "127.0.0.1", () => {
  const { port } = server.address();
  // One JSON line, which the example's test reads for the port.
  console.log(JSON.stringify({ listening: `http://127.0.0.1:${port}/jobs/greeting` }));
});

for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => server.close(() => process.exit(0)));
}
