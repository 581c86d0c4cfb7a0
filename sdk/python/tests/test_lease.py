"""The attempt's lease (docs/protocol.md, the worker's duties): once lease_ms has passed since the
assignment arrived, or since the last beat answered ok was sent, with no later beat answered ok, the
handler is stopped, no verdict is reported, and the job is given back (reason lease_lapsed) once the
handler returned. Here against a scripted jobgate whose answers and their
delays the tests choose, with sync and async handlers; the conformance suite's lease scenario runs
the same against a real one (internal/conformance, run by test_conformance.py)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import jobgate
from jobgate import _wire as wire
from jobgate._attempt import Handler, run_attempt
from jobgate._worker import TypeRunner

Beat = Callable[[int], Awaitable[dict[str, Any]]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Scripted:
    """What run_attempt needs of a Worker: beat answers what beat(n) says, open an upload whose last
    chunk is answered after store_s with what it stored, giveback refused with giveback_error if set,
    every other request ok."""

    def __init__(self, beat: Beat, store_s: float = 0.0, giveback_error: Exception | None = None) -> None:
        self._beat = beat
        self._giveback_error = giveback_error
        self._beats = 0
        self._store_s = store_s
        self.heartbeat = 0.1
        self.credential = "3f9a1c2b7d4e5f60"
        self.sent: list[tuple[str, float]] = []
        self.outcome: str | None = None
        self._hard = False
        self._attempts: set[Any] = set()
        self._data = b""

    def on_attempt(self, typ: str, outcome: str, took: float) -> None:
        self.outcome = outcome

    async def call(self, typ: str, op: str, req: Any, **kw: Any) -> dict[str, Any]:
        self.sent.append((op, time.monotonic()))
        if op == "beat":
            n = self._beats
            self._beats += 1
            return await self._beat(n)
        if op == "open":
            return {"upload": {"host": "d1", "id": "u1", "object": "o1"}}
        if op == "giveback" and self._giveback_error is not None:
            raise self._giveback_error
        return {}

    async def request(self, subj: str, data: bytes, **kw: Any) -> dict[str, Any]:
        self._data += data
        await asyncio.sleep(self._store_s)
        return {"stored": {"object": "o1", "size": len(self._data), "sha256": hashlib.sha256(self._data).hexdigest()}}

    def beats(self) -> list[float]:
        return [at for op, at in self.sent if op == "beat"]

    def reports(self) -> list[str]:
        return [op for op, _ in self.sent if op != "beat"]


def assignment(lease_ms: int | None) -> dict[str, Any]:
    a: dict[str, Any] = {
        "key": "4.r.01JD8ZQ7M3T9V6X2K5R8P4N1C0",
        "id": "01JD8ZQ7M3T9V6X2K5R8P4N1C0",
        "type": "lease_test",
        "tenant": "4",
        "requester": "r",
        "attempt": 1,
        "attempts": 2,
        "created_at": "2026-12-05T09:00:00Z",
        "params": {},
        "token": "tok",
        "timeout_ms": 60_000,
        "beat_ms": 100,
        "max_result_bytes": 1024,
    }
    if lease_ms is not None:
        a["lease_ms"] = lease_ms
    return a


async def run(w: Scripted, handler: Handler, lease_ms: int | None) -> None:
    t = TypeRunner({"name": "lease_test", "max_result_bytes": 1024}, 1, handler, None)
    await asyncio.wait_for(run_attempt(w, t, assignment(lease_ms)), 15)  # type: ignore[arg-type]


async def unanswered(n: int) -> dict[str, Any]:
    raise TimeoutError("nats: timeout")


class UntilAborted:
    """Handlers, sync and async, that run until their attempt is aborted, noting when and why."""

    def __init__(self) -> None:
        self.stopped: list[tuple[float, str | None]] = []

    def sync(self, job: jobgate.WorkerJob[Any]) -> None:
        while job.sleep(0.01):
            pass
        self.stopped.append((time.monotonic(), job.aborted))
        raise jobgate.Aborted(job.aborted or "lost")

    async def asyn(self, job: jobgate.WorkerJob[Any]) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.stopped.append((time.monotonic(), job.aborted))
            raise

    def handler(self, kind: str) -> Handler:
        return self.sync if kind == "sync" else self.asyn


kinds = pytest.mark.parametrize("kind", ["sync", "async"])


@pytest.mark.anyio
@kinds
async def test_beats_answered_ok_keep_the_attempt_until_they_go_unanswered_then_it_is_given_back(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    ok_until = 6  # beats 0..5 answered ok (about 600 ms), then none

    async def beat(n: int) -> dict[str, Any]:
        return {"lease_ms": 400} if n < ok_until else await unanswered(n)

    w, h = Scripted(beat), UntilAborted()
    began = time.monotonic()
    await run(w, h.handler(kind), 400)
    assert len(h.stopped) == 1
    at, reason = h.stopped[0]
    assert reason == "lost"
    last_ok = w.beats()[ok_until - 1]
    assert at - began > 0.4 + 0.15, "the beats answered ok kept it past the assignment's lease"
    assert at >= last_ok + 0.4, f"stopped {at - last_ok:.3f}s after the last beat answered ok"
    assert at < last_ok + 0.4 + 0.25, f"stopped {at - last_ok:.3f}s after the last beat answered ok"
    assert w.reports() == ["giveback"], "no verdict: the job given back"
    assert w.outcome == "given_back"
    assert any(r.getMessage().startswith("lease ran out") and r.levelname == "WARNING" for r in caplog.records)


@pytest.mark.anyio
@kinds
async def test_a_beats_lease_counts_from_its_sending_not_its_answer(kind: str) -> None:
    # The first beat (at ~100 ms) is answered 500 ms late with a lease of 700 ms: the lease ends
    # ~800 ms after the start, not ~1300 ms.
    async def beat(n: int) -> dict[str, Any]:
        if n > 0:
            return await unanswered(n)
        await asyncio.sleep(0.5)
        return {"lease_ms": 700}

    w, h = Scripted(beat), UntilAborted()
    await run(w, h.handler(kind), 700)
    after = h.stopped[0][0] - w.beats()[0]
    assert 0.7 <= after < 0.7 + 0.4, f"stopped {after:.3f}s after the beat was sent"
    assert w.reports() == ["giveback"]


@pytest.mark.anyio
@kinds
async def test_a_beat_refused_unavailable_does_not_move_the_lease(kind: str) -> None:
    async def beat(n: int) -> dict[str, Any]:
        raise wire.WireError("unavailable", "the job's concurrency places could not be renewed")

    w, h = Scripted(beat), UntilAborted()
    began = time.monotonic()
    await run(w, h.handler(kind), 600)
    after = h.stopped[0][0] - began
    assert len(w.beats()) >= 3, "beats were sent and refused"
    assert 0.6 <= after < 0.6 + 0.3, f"stopped {after:.3f}s after the assignment"
    assert w.reports() == ["giveback"]


@pytest.mark.anyio
async def test_a_sync_handler_that_succeeds_after_its_lease_ran_out_is_given_back_once_it_returned() -> None:
    seen: list[str | None] = []

    def deaf(job: jobgate.WorkerJob[Any]) -> None:
        time.sleep(0.7)  # deaf to its abort
        seen.append(job.aborted)

    w = Scripted(unanswered)
    began = time.monotonic()
    await run(w, deaf, 300)
    assert seen == ["lost"]
    assert w.reports() == ["giveback"], "no done: the job given back"
    assert w.sent[-1][1] - began >= 0.7, "given back once the handler returned, not while it ran"
    assert w.outcome == "given_back"


@pytest.mark.anyio
@kinds
async def test_a_success_still_being_stored_when_the_lease_ran_out_is_given_back(kind: str) -> None:
    def sync(job: jobgate.WorkerJob[Any]) -> None:
        job.output().write(b"a result\n")

    async def asyn(job: jobgate.WorkerJob[Any]) -> None:
        await job.output().awrite(b"a result\n")

    w = Scripted(unanswered, store_s=0.7)  # stored once the handler has returned, 700 ms later
    await run(w, sync if kind == "sync" else asyn, 300)
    assert w.reports() == ["open", "giveback"], "no done: the job given back"
    assert w.outcome == "given_back"


@pytest.mark.anyio
@kinds
async def test_a_give_back_refused_lost_ends_the_attempt_lost(kind: str) -> None:
    w = Scripted(unanswered, giveback_error=wire.WireError("lost", "the job is running and not this claim's"))
    await run(w, UntilAborted().handler(kind), 300)
    assert w.reports() == ["giveback"]
    assert w.outcome == "lost"


@pytest.mark.anyio
async def test_a_beat_answered_lost_ends_the_attempt_lost_with_nothing_given_back() -> None:
    async def beat(n: int) -> dict[str, Any]:
        raise wire.WireError("lost", "the job is canceled and not this claim's", canceled=True)

    def deaf(job: jobgate.WorkerJob[Any]) -> None:
        time.sleep(0.7)  # outlives the lease, deaf to its abort

    w = Scripted(beat)
    await run(w, deaf, 300)
    assert w.reports() == []
    assert w.outcome == "lost"


@pytest.mark.anyio
@kinds
async def test_without_lease_ms_unanswered_beats_do_not_stop_the_handler(kind: str) -> None:
    seen: list[str | None] = []

    def sync(job: jobgate.WorkerJob[Any]) -> None:
        job.sleep(0.8)
        seen.append(job.aborted)

    async def asyn(job: jobgate.WorkerJob[Any]) -> None:
        await asyncio.sleep(0.8)
        seen.append(job.aborted)

    w = Scripted(unanswered)
    await run(w, sync if kind == "sync" else asyn, None)
    assert seen == [None]
    assert w.reports() == ["done"]
    assert w.outcome == "succeeded"
