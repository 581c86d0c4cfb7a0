"""A worker process for the tests: the types named in TYPES, printing one JSON event a line.

Environment: JOBGATE_NATS_URL, JOBGATE_WORKER_USER, JOBGATE_WORKER_PASSWORD, WORKER_NAME, TYPES
(comma-separated), DRAIN (seconds), GATE_DIR (py_hold finishes once GATE_DIR/<gate> exists).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jobgate
from jobgate import Permanent, WorkerJob, param

NAME = os.environ.get("WORKER_NAME", "py-test")
GATES = Path(os.environ.get("GATE_DIR", "."))


def emit(event: str, **kw: Any) -> None:
    print(json.dumps({"event": event, "worker": NAME, **kw}), flush=True)


worker = jobgate.Worker(
    os.environ["JOBGATE_NATS_URL"],
    os.environ["JOBGATE_WORKER_USER"],
    os.environ["JOBGATE_WORKER_PASSWORD"],
    name=NAME,
    heartbeat=0.5,
    pull_wait=1.0,
    drain_timeout=float(os.environ.get("DRAIN", "10")),
    on_attempt=lambda typ, outcome, took: emit("attempt", type=typ, outcome=outcome),
)


@dataclass
class Echo:
    """Repeats a text, one numbered line each."""

    text: str = param(max_length=64)
    lines: int = param(3, minimum=1, maximum=1000)


def py_echo(job: WorkerJob[Echo]) -> None:
    emit("started", id=job.id, attempt=job.attempt)
    out = job.output()
    for i in range(job.params.lines):
        out.write(f"{i + 1} {job.params.text}\n".encode())
        job.progress(i + 1, job.params.lines, "lines")


async def py_async_echo(job: WorkerJob[Echo]) -> None:
    emit("started", id=job.id, attempt=job.attempt)
    out = job.output()
    for i in range(job.params.lines):
        await out.awrite(f"{i + 1} {job.params.text}\n".encode())
        job.progress(i + 1, job.params.lines, "lines")


@dataclass
class Fail:
    permanent: bool = False


def py_fail(job: WorkerJob[Fail]) -> None:
    emit("started", id=job.id, attempt=job.attempt)
    if job.params.permanent:
        raise Permanent("case 13 is sealed")
    raise RuntimeError("connection to db-7.internal refused")


@dataclass
class Hold:
    gate: str = param(max_length=64)


def py_hold(job: WorkerJob[Hold]) -> None:
    """Holds the job (progress 1 of 2) until its gate file exists or the attempt is aborted."""
    job.progress(1, 2, "steps")
    emit("started", id=job.id, attempt=job.attempt)
    while not (GATES / job.params.gate).exists():
        if not job.sleep(0.05):
            emit("aborted", id=job.id, reason=job.aborted, canceled=job.canceled)
            return
    job.output().write(f"done by {NAME} at attempt {job.attempt}\n".encode())
    job.progress(2, 2, "steps")


@dataclass
class Bytes:
    size: int = param(minimum=0, maximum=4_000_000)


def py_bytes(job: WorkerJob[Bytes]) -> None:
    """size bytes of a pattern, written in uneven pieces (the upload's chunks are 256 KiB)."""
    out = job.output()
    data = bytes((i * 31) & 0xFF for i in range(job.params.size))
    for off in range(0, len(data), 100_003):
        out.write(data[off : off + 100_003])


def py_stubborn(job: WorkerJob[Hold]) -> None:
    """Ignores its abort: only its gate ends it."""
    emit("started", id=job.id, attempt=job.attempt)
    while not (GATES / job.params.gate).exists():
        time.sleep(0.05)


TYPES: dict[str, tuple[Any, dict[str, Any]]] = {
    "py_stubborn": (py_stubborn, {"content_type": "text/plain", "concurrency": 1}),
    "py_bytes": (py_bytes, {"max_result_bytes": 1 << 20, "attempts": 1}),
    "py_echo": (py_echo, {"content_type": "text/plain", "description": "Repeats a text"}),
    "py_async_echo": (py_async_echo, {"content_type": "text/plain"}),
    "py_fail": (py_fail, {"attempts": 1}),
    "py_hold": (py_hold, {"content_type": "text/plain", "attempts": 3, "concurrency": 1}),
    "py_hold_async": (None, {}),
}


async def py_hold_async(job: WorkerJob[Hold]) -> None:
    """py_hold as an async handler: a cancel ends it at its next await."""
    emit("started", id=job.id, attempt=job.attempt)
    try:
        while not (GATES / job.params.gate).exists():
            await job.asleep(0.05)
    finally:
        if job.aborted:
            emit("aborted", id=job.id, reason=job.aborted, canceled=job.canceled)


TYPES["py_hold_async"] = (py_hold_async, {"content_type": "text/plain"})
# Declared by a worker that stops at once: its jobs wait, queued, for the client tests.
TYPES["py_idle"] = (py_hold, {"content_type": "text/plain"})

if __name__ == "__main__":
    for t in os.environ["TYPES"].split(","):
        fn, opts = TYPES[t]
        worker.register(t, fn, **opts)
    worker.run()
    emit("stopped")
    sys.exit(0)
