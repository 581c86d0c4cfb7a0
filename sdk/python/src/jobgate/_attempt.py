"""One attempt's hold on a job: the handler within its budget while beats keep the claim alive, the
output stored, the verdict reported. jobgate checks and writes everything; this side only reports."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import math
import threading
import time
import typing
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from . import _wire as wire
from ._output import Output, ResultTooLargeError, StoreOutageError, Upload
from ._schema import params_of

if TYPE_CHECKING:
    from ._worker import TypeRunner, Worker

P = TypeVar("P")

AbortReason = Literal["canceled", "lost", "timeout", "shutdown"]
Outcome = Literal["succeeded", "retry_or_failed", "lost", "given_back", "unrecorded"]


class Permanent(Exception):
    """Fails the job now, without further attempts; its message is shown to
    the job's owner: say what is wrong with the request, nothing internal. Any other exception a handler
    raises is retried while attempts remain, and its text reaches only the operator."""


class Failure(Exception):
    """A failure of a chosen category (``render_error``, ``budget_exceeded``, ``internal``) that is
    retried or not as ``retryable`` says; its message is shown to the job's owner."""

    def __init__(
        self, category: Literal["render_error", "budget_exceeded", "internal"], retryable: bool, message: str
    ) -> None:
        self.category = category
        self.retryable = retryable
        super().__init__(message)

    @property
    def kind(self) -> str:
        if self.category == "budget_exceeded":
            return "budget"
        if self.category == "internal":
            return "internal"
        return "error" if self.retryable else "permanent"


class Aborted(Exception):
    """The attempt was stopped: its owner canceled the job, the claim was lost, its time ran out, or the
    worker is shutting down and its drain time is over (``reason``)."""

    def __init__(self, reason: AbortReason) -> None:
        self.reason = reason
        super().__init__(f"job attempt aborted: {reason}")


class _UploadError(Exception):
    """An upload that failed for a reason other than an outage (retried as internal)."""


class JobLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Log lines of one attempt: its job id, type and attempt beside each call's own ``extra``
    (Python 3.11's LoggerAdapter would drop the call's)."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


class WorkerJob(Generic[P]):
    """One attempt's view of a job: ``params`` (validated by jobgate, defaults applied, decoded into
    the type's model when it has one), ``progress()``, ``output()``, and whether to stop
    (``canceled``, ``aborted``)."""

    def __init__(self, run: _AttemptRun, asg: dict[str, Any], params: P) -> None:
        self._run = run
        self.id: str = asg["id"]
        self.type: str = asg["type"]
        self.tenant: str = str(asg.get("tenant", ""))
        self.requester: str = str(asg.get("requester", ""))
        self.attempt: int = int(asg["attempt"])
        self.attempts: int = int(asg.get("attempts") or 0)
        ca = asg.get("created_at")
        self.created_at: datetime | None = (
            datetime.fromisoformat(ca.replace("Z", "+00:00")) if isinstance(ca, str) and ca else None
        )
        self.params: P = params
        self.raw_params: dict[str, Any] = asg.get("params") or {}
        # The W3C trace context of the attempt's span, when the job is traced.
        self.traceparent: str | None = asg.get("traceparent")
        self.tracestate: str | None = asg.get("tracestate")
        self.log = JobLog(
            logging.getLogger("jobgate.worker"), {"job_id": self.id, "type": self.type, "attempt": self.attempt}
        )

    def progress(self, done: int, total: int, unit: str = "") -> None:
        """Reports how far the attempt is; never blocks (sent with beats, at least every tenth)."""
        self._run.set_progress(done, total, unit)

    def output(self) -> Output:
        """The result, as a binary file streamed to jobgate as it is written (the same one each call)."""
        return self._run.output()

    @property
    def aborted(self) -> AbortReason | None:
        """Why the attempt must stop (``canceled``, ``lost``, ``timeout``, ``shutdown``), or None."""
        return self._run.reason

    @property
    def canceled(self) -> bool:
        """The job's owner canceled it: stop; whatever was written is discarded."""
        return self._run.reason == "canceled"

    def sleep(self, seconds: float) -> bool:
        """Sleeps in a sync handler, waking at once when the attempt is aborted; True if not aborted."""
        return not self._run.aborted_event.wait(seconds)

    async def asleep(self, seconds: float) -> bool:
        """Sleeps in an async handler; True if the attempt was not aborted meanwhile."""
        await asyncio.sleep(seconds)
        return self._run.reason is None


Handler = Callable[[WorkerJob[Any]], Awaitable[None] | None]


def _printable(s: str) -> str:
    return "".join(" " if ord(c) < 0x20 or ord(c) == 0x7F else c for c in s)


def _clip(s: str, n: int) -> str:
    b = s.encode()
    if len(b) <= n:
        return s
    return b[:n].decode(errors="ignore")


def _user_message(s: str) -> str:
    p = _printable(s).strip()
    return _clip(p, 497) + "…" if len(p.encode()) > 500 else p


def _count(n: Any) -> int:
    try:
        v = math.floor(float(n))
    except (TypeError, ValueError, OverflowError):
        return 0
    return min(max(v, 0), 2**40)


def _describe(err: BaseException) -> str:
    name = type(err).__name__
    msg = str(err)
    return f"{name}: {msg}" if msg else name


class _Beater:
    """Beats once an interval and, when kicked by progress, soon after (at most five times an
    interval); one beat at a time."""

    def __init__(self, every: float, beat: Callable[[], Awaitable[None]]) -> None:
        self.every = every
        self._beat = beat
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._inflight: asyncio.Task[None] | None = None
        self._last = 0.0
        self._kicked = False
        self._stopped = False

    def start(self) -> None:
        self._arm(self.every)

    def kick(self) -> None:
        if self._stopped:
            return
        if self._inflight is not None:
            self._kicked = True
            return
        now = time.monotonic()
        wait = max(0.0, self._last + self.every / 5 - now)
        if now + wait < self._due:
            self._arm(wait)

    async def stop(self) -> None:
        self._stopped = True
        if self._handle is not None:
            self._handle.cancel()
        if self._inflight is not None:
            with contextlib.suppress(Exception):
                await self._inflight

    def _arm(self, s: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._due = time.monotonic() + s
        self._handle = asyncio.get_running_loop().call_later(s, self._fire)

    def _fire(self) -> None:
        if self._stopped:
            return
        self._handle = None
        self._inflight = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        try:
            await self._beat()
        finally:
            self._inflight = None
            self._last = time.monotonic()
        if self._stopped:
            return
        if self._kicked:
            self._kicked = False
            self._arm(self.every / 5)
        else:
            self._arm(self.every)


class _AttemptRun:
    def __init__(self, w: Worker, t: TypeRunner, asg: dict[str, Any]) -> None:
        self.w, self.t, self.asg = w, t, asg
        self.loop = asyncio.get_running_loop()
        self.held = {"key": asg["key"], "token": asg["token"]}
        self.log = JobLog(
            logging.getLogger("jobgate.worker"), {"job_id": asg["id"], "type": asg["type"], "attempt": asg["attempt"]}
        )
        self.timeout = float(asg["timeout_ms"]) / 1000
        self.deadline = time.monotonic() + self.timeout + wire.OP_TIMEOUT
        every = w.heartbeat
        beat_ms = asg.get("beat_ms")
        if isinstance(beat_ms, int | float) and beat_ms > 0:
            every = min(every, beat_ms / 1000)
        self.beater = _Beater(max(every, 0.1), self.beat)
        self.reason: AbortReason | None = None
        self.aborted_event = threading.Event()
        self.lost = False
        self._prog_lock = threading.Lock()
        self.prog: dict[str, Any] | None = None
        self._next_step = 0
        self._upload: Upload | None = None
        self._out: Output | None = None
        self._task: asyncio.Future[Any] | None = None
        self._is_async = False
        # The lease: until when (time.monotonic()) the attempt is this worker's for sure on
        # jobgate's word, or None when jobgate said nothing (an older one: no lease). See _lease_from.
        self.arrived = time.monotonic()
        self.lease_end: float | None = None
        self.lease_ms = 0.0
        self.lease_out = False
        self._lease_handle: asyncio.TimerHandle | None = None

    def abort(self, reason: AbortReason) -> None:
        if self.reason is not None:
            return
        self.reason = reason
        self.aborted_event.set()
        # An async handler is cancelled at its next await, as pkg/worker's ctx ends; a sync one (a
        # thread) sees job.aborted / job.canceled and returns.
        if self._is_async and self._task is not None and not self._task.done():
            self._task.cancel()

    def output(self) -> Output:
        if self._out is None:
            self._upload = Upload(
                self.w,
                self.t.name,
                self.held,
                int(self.asg.get("max_result_bytes") or 0) or self.t.max_result_bytes,
                self.deadline,
            )
            self._out = Output(self._upload, self.loop)
        return self._out

    def set_progress(self, done: int, total: int, unit: str) -> None:
        d, tot = _count(done), _count(total)
        with self._prog_lock:
            self.prog = {"done": d, "total": tot, "unit": _clip(_printable(str(unit or "")), 32)}
            kick = tot > 0 and d >= self._next_step
            if kick:
                step = max(1, tot // 10)
                self._next_step = (d // step + 1) * step
        if kick:
            if self._in_loop():
                self.beater.kick()
            else:
                self.loop.call_soon_threadsafe(self.beater.kick)

    def _in_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    async def run(self) -> Outcome:
        self.log.debug("job claimed")  # its outcome is logged at info
        timer = self.loop.call_later(self.timeout, self.abort, "timeout")
        self._lease_from(self.arrived, self.asg.get("lease_ms"))
        self.beater.start()
        verdict: dict[str, Any] | None = None
        stored: dict[str, Any] | None = None
        try:
            await self._handler()
            # A handler that returns once its attempt was aborted stopped because it was told to
            # (a sync handler cannot be interrupted otherwise): no success, whatever it wrote. A
            # timeout is the type's rule, as pkg/worker has it; a shutdown gives the job back. One
            # that returns after its lease ran out has no success to report either.
            if self._lease_ran_out() or self.lost or self.reason is not None:
                raise Aborted(self.reason or "lost")
            stored = await self._finish_output()
        except asyncio.CancelledError as e:
            if self.reason is None:
                raise  # the worker itself is being torn down
            verdict = self._classify(Aborted(self.reason) if not isinstance(e, Aborted) else e)
        except Exception as e:
            verdict = self._classify(e)
        finally:
            timer.cancel()
            await self.beater.stop()
            if self._lease_handle is not None:
                self._lease_handle.cancel()
        if self._out is not None:
            self._out.close()
        # Past the lease no verdict is reported, only the job given back (the deadline is still
        # checked, the beats having stopped): a success stored after it included.
        if self._lease_ran_out() and (verdict is None or verdict["do"] != "refused"):
            verdict = {"do": "giveback", "reason": "lease_lapsed"}
        return await (self._conclude(verdict) if verdict is not None else self._succeed(stored))

    async def _handler(self) -> None:
        try:
            params = params_of(self.t.model, self.asg.get("params") or {}) if self.t.model else self.asg.get("params")
        except Exception as e:
            raise Permanent(f"params do not match the type's model: {e}") from e
        job: WorkerJob[Any] = WorkerJob(self, self.asg, params)
        fn = self.t.handler
        if inspect.iscoroutinefunction(fn):
            self._is_async = True
            self._task = asyncio.ensure_future(typing.cast(Awaitable[None], fn(job)))
        else:
            self._task = self._in_thread(fn, job)
        if self.reason is not None and self._is_async:
            self._task.cancel()
        result = await self._task
        if inspect.isawaitable(result):  # a sync def that returned a coroutine
            await result

    def _in_thread(self, fn: Callable[..., Any], job: WorkerJob[Any]) -> asyncio.Future[Any]:
        """Runs a sync handler in a thread of its own (a slot runs one attempt at a time, so the slots
        bound the threads). A daemon thread: a handler that ignores its abort and is abandoned at
        shutdown does not keep the process from exiting."""
        fut: asyncio.Future[Any] = self.loop.create_future()
        ctx = contextvars.copy_context()

        def settle(ok: bool, value: Any) -> None:
            if fut.done():
                return
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

        def run() -> None:
            try:
                r = ctx.run(fn, job)
            except BaseException as e:
                ok, value = False, e
            else:
                ok, value = True, r
            with contextlib.suppress(RuntimeError):  # the loop closed: an abandoned attempt
                self.loop.call_soon_threadsafe(settle, ok, value)

        threading.Thread(target=run, name=f"jobgate-{job.id}", daemon=True).start()
        return fut

    async def _finish_output(self) -> dict[str, Any] | None:
        """Completes the upload of a handler that returned: the last chunk, the kept copy stored again
        when the store broke the stream off, and what jobgate stored compared with what was written."""
        out, up = self._out, self._upload
        if out is None or up is None:
            return None
        try:
            await out.drain()
            await up.finish()
        except (ResultTooLargeError, StoreOutageError):
            raise
        except wire.WireError as e:
            if up.too_large:
                raise
            raise _UploadError(f"result not stored: {e}") from e
        except Exception as e:
            raise _UploadError(f"result not stored: {_describe(e)}") from e
        if up.too_large:
            raise _UploadError("the handler returned after a write past the type's size limit")
        if up.broken is not None:
            copy = up.kept_copy()
            if copy is None:
                raise up.broken
            self.log.info("result upload broken off, storing the result again", extra={"cause": str(up.broken)})
            try:
                up.stored = await up.store_again(copy)
            except StoreOutageError:
                raise
            except Exception as e:
                raise _UploadError(f"result not stored: {_describe(e)}") from e
        stored, digest = up.stored, up.sum()
        if stored is None or stored.get("size") != up.n or stored.get("sha256") != digest:
            raise _UploadError(f"jobgate stored {stored and stored.get('size')} bytes of {up.n}")
        return stored

    def _classify(self, err: BaseException) -> dict[str, Any]:
        """What ended an attempt without a result, as a verdict to report."""
        reason = self.reason
        message = _clip(_describe(err), 2048)
        up = self._upload
        # A refused result comes first: jobgate failed the job when it refused it, so a beat after
        # that finds the claim lost, and the refusal is what the operator must read in the log.
        if up is not None and up.refused:
            return {"do": "refused", "message": message}
        if self._lease_ran_out():
            return {"do": "giveback", "reason": "lease_lapsed"}
        if self.lost or reason in ("lost", "canceled"):
            return {"do": "lost"}
        if reason == "shutdown" or self.w._hard:
            return {"do": "giveback", "reason": "shutdown"}
        if isinstance(err, StoreOutageError):
            return {"do": "giveback", "reason": "store_outage"}
        if up is not None and up.too_large:
            return {"do": "fail", "kind": "too_large", "retryable": False, "message": message, "user": ""}
        if isinstance(err, _UploadError):
            return {"do": "fail", "kind": "internal", "retryable": True, "message": message, "user": ""}
        if isinstance(err, Permanent):
            return {
                "do": "fail",
                "kind": "permanent",
                "retryable": False,
                "message": message,
                "user": _user_message(str(err)),
            }
        if isinstance(err, Failure):
            return {
                "do": "fail",
                "kind": err.kind,
                "retryable": err.retryable,
                "message": message,
                "user": _user_message(str(err)),
            }
        if reason == "timeout":
            return {"do": "fail", "kind": "timeout", "retryable": True, "message": message, "user": ""}
        return {"do": "fail", "kind": "error", "retryable": True, "message": message, "user": ""}

    def _verdict_deadline(self) -> float:
        """A verdict is reported within the attempt's budget plus the time to report it."""
        return time.monotonic() + self.timeout + wire.OP_TIMEOUT

    async def _succeed(self, stored: dict[str, Any] | None) -> Outcome:
        req: dict[str, Any] = dict(self.held)
        if stored is not None:
            req["result"] = stored
        if self.prog is not None:
            req["progress"] = self.prog
        try:
            await self.w.call(self.t.name, "done", req, patient=True, deadline=self._verdict_deadline())
        except wire.WireError as e:
            if e.code == "lost":
                self.log.info("job ended elsewhere before it succeeded here", extra={"why": e.message})
                return "lost"
            self.log.warning("success not recorded: the claim goes stale and the job is retried", extra={"err": str(e)})
            return "unrecorded"
        except Exception as e:
            self.log.warning("success not recorded: the claim goes stale and the job is retried", extra={"err": str(e)})
            return "unrecorded"
        self.log.info("job succeeded", extra={"size": stored.get("size", 0) if stored else 0})
        return "succeeded"

    async def _conclude(self, v: dict[str, Any]) -> Outcome:
        name = self.t.name
        if v["do"] == "lost":
            self.log.info("job no longer held here (canceled, finished or taken over), stopping")
            return "lost"
        if v["do"] == "refused":
            # jobgate failed the job (budget_exceeded) before it answered: a fail would be answered lost.
            self.log.warning(
                "result refused: no room in the tenant's result quota or the result storage; jobgate failed the job",
                extra={"why": v["message"]},
            )
            return "retry_or_failed"
        if v["do"] == "giveback":
            try:
                await self.w.call(
                    name,
                    "giveback",
                    {**self.held, "reason": v["reason"]},
                    patient=True,
                    deadline=self._verdict_deadline(),
                )
            except Exception as e:
                if v["reason"] == "lease_lapsed" and isinstance(e, wire.WireError) and e.code == "lost":
                    # As expected once jobgate took the claim over.
                    self.log.info("job taken over elsewhere before it was given back", extra={"why": e.message})
                    return "lost"
                self.log.warning("could not give the job back", extra={"reason": v["reason"], "err": str(e)})
                return "unrecorded"
            self.log.info("job given back", extra={"reason": v["reason"]})
            return "given_back"
        req: dict[str, Any] = {**self.held, "kind": v["kind"], "message": v["message"]}
        if v["retryable"]:
            req["retryable"] = True
        if v["user"]:
            req["user_message"] = v["user"]
        try:
            await self.w.call(name, "fail", req, patient=True, deadline=self._verdict_deadline())
        except wire.WireError as e:
            if e.code == "lost":
                self.log.info("job ended elsewhere before its failure was recorded")
                return "lost"
            self.log.warning("failure not recorded: the claim goes stale and the job is retried", extra={"err": str(e)})
            return "unrecorded"
        except Exception as e:
            self.log.warning("failure not recorded: the claim goes stale and the job is retried", extra={"err": str(e)})
            return "unrecorded"
        self.log.info("attempt failed", extra={"kind": v["kind"], "cause": v["message"]})
        return "retry_or_failed"

    def _lease_from(self, since: float, lease_ms: Any) -> None:
        """Sets the lease to end lease_ms after since (the assignment's arrival, or when a beat
        answered ok was sent: never later than jobgate counts it). Once it ends with no later beat
        answered ok, jobgate may take the claim over or give the job's concurrency place to another:
        the handler is stopped (aborted, reason lost), no verdict is reported, and once the handler
        returned the job is given back (reason lease_lapsed), which jobgate refuses if it took the
        claim over and which otherwise spares the job an attempt lost to the outage. No lease_ms (an
        older jobgate): no deadline."""
        if self._lease_ran_out():
            return
        if self._lease_handle is not None:
            self._lease_handle.cancel()
            self._lease_handle = None
        if (
            isinstance(lease_ms, bool)
            or not isinstance(lease_ms, int | float)
            or not math.isfinite(lease_ms)
            or lease_ms <= 0
        ):
            self.lease_end = None
            return
        self.lease_end = since + lease_ms / 1000
        self.lease_ms = lease_ms
        self._watch_lease()

    def _watch_lease(self) -> None:
        """Checks the lease when it is due (again, should a timer fire early)."""
        self._lease_handle = None
        if self.lease_end is None or self._lease_ran_out():
            return
        left = self.lease_end - time.monotonic()
        self._lease_handle = self.loop.call_later(max(left, 0.001), self._watch_lease)

    def _lease_ran_out(self) -> bool:
        """Whether the lease ran out; the first time it is seen, stops the handler."""
        if self.lease_out:
            return True
        if self.lease_end is None or time.monotonic() < self.lease_end:
            return False
        self.lease_out = True
        self.lost = True
        self.log.warning(
            "lease ran out with no beat answered: stopping the handler",
            extra={"lease_ms": self.lease_ms},
        )
        self.abort("lost")
        return True

    async def beat(self) -> None:
        """One beat with the latest progress; a lost answer aborts the handler."""
        req: dict[str, Any] = dict(self.held)
        with self._prog_lock:
            if self.prog is not None:
                req["progress"] = dict(self.prog)
        sent = time.monotonic()
        try:
            reply = await self.w.call(self.t.name, "beat", req, timeout=self.beater.every)
            # Counted from the sending; an answer after the lease ran out does not revive it.
            self._lease_from(sent, reply.get("lease_ms"))
        except wire.WireError as e:
            if e.code == "lost":
                self.lost = True
                # Not this attempt's any more: no lease to keep, nothing to give back.
                self.lease_end = None
                if self._lease_handle is not None:
                    self._lease_handle.cancel()
                self.abort("canceled" if e.canceled else "lost")
                return
            self.log.warning("beat not delivered", extra={"err": str(e)})
        except Exception as e:
            # Not worth failing the attempt for; the next beat tries again.
            self.log.warning("beat not delivered", extra={"err": str(e)})


async def run_attempt(w: Worker, t: TypeRunner, asg: dict[str, Any]) -> None:
    a = _AttemptRun(w, t, asg)
    w._attempts.add(a)
    started = time.monotonic()
    try:
        outcome = await a.run()
    finally:
        w._attempts.discard(a)
    if w.on_attempt is not None:
        w.on_attempt(t.name, outcome, time.monotonic() - started)
