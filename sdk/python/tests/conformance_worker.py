"""The conformance suite's Python worker (internal/conformance): the job types and handlers of
test/conformance/goworker and sdk/typescript/test/conformance-worker.ts, on this package. It prints
one JSON line per thing the suite checks.

Environment: JOBGATE_NATS_URL, JOBGATE_WORKER_USER, JOBGATE_WORKER_PASSWORD, CONF_SPEC (testdata/types.json),
CONF_KINDS (comma-separated kinds of CONF_SPEC to run), CONF_PREFIX (type name prefix of unshared kinds),
CONF_GATES (the directory whose files open hold-mode gates), CONF_NAME, CONF_LABEL (what its handlers write:
"done by <label>"), CONF_HEARTBEAT_MS, CONF_DRAIN_MS; CONF_ASYNC=1 runs async handlers instead of sync ones.
Run: bin/pyenv/bin/python sdk/python/tests/conformance_worker.py
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import jobgate
from jobgate import Permanent, WorkerJob


def env(k: str, default: str | None = None) -> str:
    v = os.environ.get(k, default)
    if v is None:
        raise SystemExit(f"{k} is not set")
    return v


def say(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "impl": "py", **fields}) + "\n")
    sys.stdout.flush()


class JSONLines(logging.Formatter):
    _skip = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in record.__dict__.items() if k not in self._skip}
        return json.dumps({"level": record.levelname.lower(), "msg": record.getMessage(), **fields}, default=str)


spec = json.loads(Path(env("CONF_SPEC")).read_text())
prefix = env("CONF_PREFIX", "py")
label = env("CONF_LABEL", "py")
gates = Path(env("CONF_GATES"))


def block(i: int, seed: int) -> bytes:
    return bytes((i * 7 + j * 13 + seed) & 0xFF for j in range(1000))


def tail(n: int, seed: int) -> bytes:
    return bytes((j * 31 + seed) & 0xFF for j in range(n))


def started(job: WorkerJob[dict[str, Any]]) -> None:
    tp = job.traceparent.split("-")[1] if job.traceparent and job.traceparent.count("-") >= 3 else ""
    say("started", id=job.id, type=job.type, attempt=job.attempt, mode=job.params["mode"], trace_id=tp)


def work(job: WorkerJob[dict[str, Any]]) -> None:
    p = job.params
    started(job)
    if p["mode"] == "result":
        out = job.output()
        for i in range(p["blocks"]):
            out.write(f"{i} {p['seed']} ü€\n".encode())
            out.write(block(i, p["seed"]))
            job.progress(i + 1, p["blocks"], "blocks")
        if p["tail"] > 0:
            out.write(tail(p["tail"], p["seed"]))
        return
    if p["mode"] == "hold":
        job.progress(1, 2, "steps")
        while True:
            if job.aborted:
                say("aborted", id=job.id, attempt=job.attempt, reason=job.aborted)
                raise jobgate.Aborted(job.aborted)
            if p["gate"] and (gates / p["gate"]).exists():
                job.progress(2, 2, "steps")
                job.output().write(f"done by {label} at attempt {job.attempt}\n".encode())
                return
            job.sleep(0.05)
    if p["mode"] == "permanent":
        raise Permanent(p["message"])
    raise RuntimeError(p["message"])


async def work_async(job: WorkerJob[dict[str, Any]]) -> None:
    p = job.params
    started(job)
    if p["mode"] == "result":
        out = job.output()
        for i in range(p["blocks"]):
            await out.awrite(f"{i} {p['seed']} ü€\n".encode())
            await out.awrite(block(i, p["seed"]))
            job.progress(i + 1, p["blocks"], "blocks")
        if p["tail"] > 0:
            await out.awrite(tail(p["tail"], p["seed"]))
        return
    if p["mode"] == "hold":
        job.progress(1, 2, "steps")
        try:
            while True:
                if p["gate"] and (gates / p["gate"]).exists():
                    break
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            say("aborted", id=job.id, attempt=job.attempt, reason=job.aborted)
            raise
        job.progress(2, 2, "steps")
        await job.output().awrite(f"done by {label} at attempt {job.attempt}\n".encode())
        return
    if p["mode"] == "permanent":
        raise Permanent(p["message"])
    raise RuntimeError(p["message"])


async def main() -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONLines())
    logging.getLogger("jobgate").addHandler(handler)
    logging.getLogger("jobgate").setLevel(logging.INFO)
    w = jobgate.Worker(
        env("JOBGATE_NATS_URL"),
        env("JOBGATE_WORKER_USER"),
        env("JOBGATE_WORKER_PASSWORD"),
        name=env("CONF_NAME", f"py-conformance-{os.getpid()}"),
        heartbeat=float(env("CONF_HEARTBEAT_MS", "500")) / 1000,
        drain_timeout=float(env("CONF_DRAIN_MS", "1000")) / 1000,
        pull_wait=1.0,
        on_attempt=lambda typ, outcome, took: say("attempt", type=typ, outcome=outcome, took_ms=round(took * 1000)),
    )
    for kind in env("CONF_KINDS").split(","):
        k = spec["types"].get(kind)
        if k is None:
            raise SystemExit(f"no kind {kind} in {env('CONF_SPEC')}")
        w.register(
            f"shared_{kind}" if k.get("shared") else f"{prefix}_{kind}",
            work_async if env("CONF_ASYNC", "") == "1" else work,
            schema=spec["schema"],
            description=f"conformance {kind} ({'shared' if k.get('shared') else prefix})",
            timeout=k["timeout_seconds"],
            attempts=k["attempts"],
            max_result_bytes=k["max_result_bytes"],
            content_type=k["content_type"],
            concurrency=k["concurrency"],
        )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await w.start()
    except Exception as e:
        sys.stderr.write(f"start: {e}\n")
        return 1
    say("ready", name=w.name, credential=w.credential)
    await stop.wait()
    say("stopping")
    await w.stop()
    say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
