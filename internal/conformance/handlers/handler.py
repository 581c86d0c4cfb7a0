"""The conformance suite's endpoint handler in Python (docs/conformance.md,
"Endpoint types"): the standard library only (http.server, hmac), so it runs
on any Python 3.9+ with nothing installed.

Environment: CONF_PORT (it listens on 127.0.0.1:CONF_PORT), CONF_SECRETS (a
JSON file: each type's path, "/<type>", to its whsec_ secrets), CONF_LABEL
(what its handlers write: "done by <label> at attempt <n>"), CONF_GATES (the
directory whose files open hold gates). It prints one JSON line per thing the
suite checks. CONF_BREAK=verify skips the signature check (the runner's own
test).
"""

import base64
import hashlib
import hmac
import json
import os
import select
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LABEL = os.environ["CONF_LABEL"]
GATES = os.environ["CONF_GATES"]
with open(os.environ["CONF_SECRETS"], encoding="utf-8") as f:
    SECRETS = json.load(f)

_out = threading.Lock()
_flight = threading.Lock()
in_flight: dict = {}  # job id -> the handlers of its requests whose connections are open


def say(event, **fields):
    with _out:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()


def verify(secrets, headers, body):
    """Standard Webhooks by hand (docs/endpoints.md): any of the signatures,
    under any of the secrets, over id.timestamp.body; 5 minutes of skew."""
    msg_id, ts = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
    if not ts.isdigit() or abs(time.time() - int(ts)) > 300:
        return False
    for secret in secrets:
        key = base64.b64decode(secret.removeprefix("whsec_"))
        want = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest())
        for sig in headers.get("webhook-signature", "").split():
            version, _, value = sig.partition(",")
            if version == "v1" and hmac.compare_digest(value.encode(), want):
                return True
    return False


def expected_result(blocks, tail, seed):
    out = bytearray()
    for i in range(blocks):
        out += f"{i} {seed} ü€\n".encode()
        out += bytes((i * 7 + k * 13 + seed) & 255 for k in range(1000))
    out += bytes((k * 31 + seed) & 255 for k in range(tail))
    return bytes(out)


def gate_open(name):
    return bool(name) and os.path.exists(os.path.join(GATES, name))


def callback(job, url, op, body=None, method="POST", content_type="application/json"):
    """One callback; prints its answer and returns the status."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    req = urllib.request.Request(f"{url}/{op}", data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    canceled = False
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            status = resp.status
    except urllib.error.HTTPError as e:
        status = e.code
        try:
            canceled = bool(json.loads(e.read() or b"{}").get("canceled"))
        except ValueError:
            pass
    say("callback", id=job["id"], attempt=job["attempt"], op=op, status=status, canceled=canceled)
    return status


def run_async(job, url, params, late):
    """A 202's work: beats with progress while the gate is shut, then the
    result, then done. late: the attempt's time runs out before it reports."""
    if callback(job, url, "beat", {"progress": {"done": 1, "total": 2, "unit": "steps"}}) != 204:
        return
    last = time.monotonic()
    while not gate_open(params["gate"]):
        time.sleep(0.05)
        if not late and time.monotonic() - last > 1:
            if callback(job, url, "beat") != 204:
                return  # canceled, or the attempt is lost: stop working on it
            last = time.monotonic()
    if callback(job, url, "beat", {"progress": {"done": 2, "total": 2, "unit": "steps"}}) != 204 and not late:
        return
    text = f"done by {LABEL} at attempt {job['attempt']}\n".encode()
    if callback(job, url, "result", text, method="PUT", content_type="text/plain") != 204 and not late:
        return
    callback(job, url, "done")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - http.server's name
        sys.stderr.write("handler: " + (format % args) + "\n")

    def answer(self, status, body=b"", headers=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def closed(self, wait=0.05):
        """The caller closed the connection (cancel, timeout, a dead
        dispatcher): readable with nothing to read."""
        r, _, _ = select.select([self.connection], [], [], wait)
        if not r:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        secrets = SECRETS.get(self.path)
        # CONF_BREAK=verify runs what it is sent unverified: the runner's
        # own test sees the forgery scenario fail.
        if secrets is None or os.environ.get("CONF_BREAK") != "verify" and not verify(secrets, self.headers, body):
            say("refused", path=self.path)
            problem = {"type": "about:blank", "title": "Unauthorized", "status": 401, "detail": "not signed by jobgate"}
            return self.answer(401, json.dumps(problem).encode(), {"Content-Type": "application/problem+json"})
        msg = json.loads(body)
        job, params = msg["job"], msg["job"]["params"]
        trace = self.headers.get("traceparent", "")
        with _flight:
            # The job's other requests still open as this one arrives (one
            # whose caller closed it counts no more, noticed or not).
            live = {h for h in in_flight.get(job["id"], set()) if not h.closed(0)}
            live.add(self)
            in_flight[job["id"]] = live
            now = len(live)
        say("started", id=job["id"], type=job["type"], attempt=job["attempt"], mode=params["mode"],
            webhook_id=self.headers.get("webhook-id"), trace_id=trace.split("-")[1] if trace.count("-") == 3 else "",
            in_flight=now, callback=bool(msg.get("callback")))
        try:
            self.handle_job(job, params, msg.get("callback", ""))
        finally:
            with _flight:
                in_flight[job["id"]].discard(self)

    def handle_job(self, job, params, url):
        mode, n = params["mode"], job["attempt"]
        done = f"done by {LABEL} at attempt {n}\n".encode()
        if mode == "result":
            return self.answer(200, expected_result(params["blocks"], params["tail"], params["seed"]),
                               {"Content-Type": "application/octet-stream"})
        if mode == "hold":
            # The job's gate, or its gate for this attempt alone.
            while not gate_open(params["gate"]) and not gate_open(f"{params['gate']}.a{n}" if params["gate"] else ""):
                if self.closed():
                    say("aborted", id=job["id"], attempt=n)
                    self.close_connection = True
                    return
            self.answer(200, done, {"Content-Type": "text/plain"})
            say("answered", id=job["id"], attempt=n, status=200)
            return
        if mode == "permanent":
            problem = {"type": "about:blank", "title": "Rejected", "status": 422, "detail": params["message"]}
            return self.answer(422, json.dumps(problem).encode(), {"Content-Type": "application/problem+json"})
        if mode == "flaky" and n == 1:
            return self.answer(503, b"", {"Retry-After": "1"})
        if mode == "flaky":
            return self.answer(200, done, {"Content-Type": "text/plain"})
        if mode in ("async", "late") and (mode == "async" or n == 1):
            self.answer(202)
            threading.Thread(target=run_async, args=(job, url, params, mode == "late"), daemon=True).start()
            return
        if mode == "late":
            return self.answer(200, done, {"Content-Type": "text/plain"})
        self.answer(400, b"unknown mode")


class Server(ThreadingHTTPServer):
    daemon_threads = True


if __name__ == "__main__":
    server = Server(("127.0.0.1", int(os.environ["CONF_PORT"])), Handler)
    say("ready", port=server.server_address[1])
    server.serve_forever()
