"""Worker runs the job types of one process over the worker protocol v1 (docs/protocol.md), as
pkg/worker does in Go and sdk/typescript in Node.js."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import re
import signal
import socket
import threading
import time
import typing
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import nats
import nats.errors
from nats.aio.client import Client as NATS

from . import _wire as wire
from ._attempt import Handler, WorkerJob, _AttemptRun, run_attempt
from ._output import transient, unavailable
from ._retry import jitter
from ._schema import schema_of

log = logging.getLogger("jobgate.worker")

H = TypeVar("H", bound=Callable[..., Any])


class TypeRunner:
    """A registered type: its declaration, handler and slots."""

    def __init__(self, decl: dict[str, Any], concurrency: int, handler: Handler, model: Any) -> None:
        self.decl = decl
        self.name: str = decl["name"]
        self.max_result_bytes: int = decl["max_result_bytes"]
        self.concurrency = concurrency
        self.handler = handler
        self.model = model
        self.busy = 0  # regular slots running a job
        self.running: dict[str, int] = {}  # jobs running here per tenant

    def started(self, tenant: str) -> None:
        self.running[tenant] = self.running.get(tenant, 0) + 1

    def ended(self, tenant: str) -> None:
        n = self.running.get(tenant, 1) - 1
        if n <= 0:
            self.running.pop(tenant, None)
        else:
            self.running[tenant] = n

    def running_jobs(self) -> int:
        return min(sum(self.running.values()), wire.MAX_BUSY)

    def newcomer_request(self) -> list[str] | None:
        """The tenants a newcomer slot must leave out, or None while a regular slot is free."""
        if self.busy < self.concurrency:
            return None
        return list(self.running)[: wire.MAX_RUNNING_TENANTS]


def _default_name() -> str:
    host = re.sub(r"[^A-Za-z0-9_.:@-]", "_", socket.gethostname()) or "worker"
    return f"{host[:96]}-{os.getpid()}-{os.urandom(3).hex()}"


def _model_of(handler: Callable[..., Any]) -> Any:
    """P of a handler annotated ``def h(job: WorkerJob[P])``, else None."""
    try:
        hints = typing.get_type_hints(handler)
    except Exception:
        return None
    params = [p for p in inspect.signature(handler).parameters if p in hints]
    if not params:
        return None
    tp = hints[params[0]]
    if typing.get_origin(tp) is WorkerJob:
        args = typing.get_args(tp)
        if args and args[0] is not Any and isinstance(args[0], type) and args[0] not in (dict, object):
            return args[0]
    return None


class Worker:
    """Runs the registered job types of one process.

    ``url`` is the deployment's NATS (``serve --nats-listen``); ``user`` and ``password`` a worker
    credential (``jobgate nats-user --worker --type T``). ``heartbeat`` (s) is the longest time between
    two beats (jobgate may ask for shorter), ``pull_wait`` (s, at most 10) how long one request for work
    waits, ``drain_timeout`` (s) how long a stop lets running jobs finish before it aborts them and
    gives their jobs back, ``newcomer_slots`` the extra slots per type that take only a tenant with
    nothing running here while every regular slot is busy (-1: none).
    """

    def __init__(
        self,
        url: str | list[str] = "nats://127.0.0.1:4222",
        user: str | None = None,
        password: str | None = None,
        *,
        name: str | None = None,
        credential: str | None = None,
        heartbeat: float = 5.0,
        pull_wait: float = 5.0,
        drain_timeout: float = 10.0,
        connect_timeout: float = 5.0,
        newcomer_slots: int = 1,
        on_attempt: Callable[[str, str, float], None] | None = None,
    ) -> None:
        self.servers = url
        self.user = user
        self.password = password
        self.name = name or _default_name()
        self.credential = credential or wire.credential_id(user or "")
        self.heartbeat = heartbeat
        self.pull_wait = pull_wait
        self.drain_timeout = drain_timeout
        self.connect_timeout = connect_timeout
        self.newcomer_slots = 1 if newcomer_slots == 0 else max(newcomer_slots, 0)
        self.on_attempt = on_attempt
        errs: list[str] = []
        if not wire.valid_worker_name(self.name):
            errs.append(f"name {self.name!r} must match [A-Za-z0-9_.:@-]{{1,128}}")
        if not wire.valid_credential(self.credential):
            errs.append(f"credential {self.credential!r} is not a credential id")
        if min(heartbeat, pull_wait, drain_timeout, connect_timeout) <= 0:
            errs.append("heartbeat, pull_wait, drain_timeout and connect_timeout must be positive")
        if pull_wait * 1000 > wire.MAX_WAIT_MS:
            errs.append(f"pull_wait must be at most {wire.MAX_WAIT_MS // 1000} s")
        if self.newcomer_slots > 64:
            errs.append("newcomer_slots must be at most 64")
        if errs:
            raise ValueError("worker: " + "; ".join(errs))
        self._types: list[TypeRunner] = []
        self._nc: NATS | None = None
        self._started = False
        self._stopping = False
        self._stop_event: asyncio.Event | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._done: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._hello_task: asyncio.Task[None] | None = None
        self._attempts: set[_AttemptRun] = set()
        self._hard = False
        self._started_at = datetime.now(UTC)
        self._denied: set[str] = set()

    # -- registration ----------------------------------------------------------------------------

    def job_type(
        self,
        name: str,
        *,
        schema: dict[str, Any] | None = None,
        params: Any = None,
        description: str | None = None,
        timeout: float = 120,
        attempts: int = 3,
        max_result_bytes: int = 64 << 20,
        content_type: str = "application/octet-stream",
        concurrency: int = 2,
        retry: Mapping[str, float] | None = None,
        concurrency_keys: Sequence[Mapping[str, Any]] | None = None,
        rate_limit: Mapping[str, Any] | None = None,
    ) -> Callable[[H], H]:
        """Registers the decorated function (``def`` or ``async def``, taking the job) as the handler of
        job type ``name``. ``params`` is a dataclass or pydantic model the params are decoded into (by
        default the ``P`` of a ``job: WorkerJob[P]`` annotation); ``schema`` the JSON Schema of the
        params, generated from the model when omitted. ``timeout`` is one attempt's budget in whole
        seconds. Returning succeeds the job with what was written to ``job.output()``; raising
        :class:`Permanent` fails it at once with its message shown to the owner; any other exception is
        retried with backoff while ``attempts`` remain.

        The type's flow control, held by jobgate across every worker process and dispatcher:
        ``retry={"initial_seconds": 10, "max_seconds": 600, "multiplier": 3}`` spaces the retries
        (full jitter; defaults 30, 3600, 2), ``concurrency_keys=[{"key": "/params/customer", "limit":
        1}]`` runs at most ``limit`` jobs with the same key value at once (key ``"tenant"``,
        ``"requester"`` or a JSON Pointer into the params), ``rate_limit={"per_second": 10, "burst":
        10, "key": "type"}`` bounds the attempts started a second. jobgate checks their bounds: a
        refusal fails :meth:`start` with a :class:`WireError` ``invalid``."""

        def register(fn: H) -> H:
            self.register(
                name,
                fn,
                schema=schema,
                params=params,
                description=description,
                timeout=timeout,
                attempts=attempts,
                max_result_bytes=max_result_bytes,
                content_type=content_type,
                concurrency=concurrency,
                retry=retry,
                concurrency_keys=concurrency_keys,
                rate_limit=rate_limit,
            )
            return fn

        return register

    def register(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        schema: dict[str, Any] | None = None,
        params: Any = None,
        description: str | None = None,
        timeout: float = 120,
        attempts: int = 3,
        max_result_bytes: int = 64 << 20,
        content_type: str = "application/octet-stream",
        concurrency: int = 2,
        retry: Mapping[str, float] | None = None,
        concurrency_keys: Sequence[Mapping[str, Any]] | None = None,
        rate_limit: Mapping[str, Any] | None = None,
    ) -> None:
        """:meth:`job_type` without the decorator."""
        if self._started:
            raise RuntimeError("worker: already started")
        if not callable(handler):
            raise TypeError(f"worker: type {name!r}: the handler must be callable")
        if not wire.valid_type_name(name):
            raise ValueError(f"worker: type name {name!r} must match [a-z][a-z0-9_]{{0,63}}")
        if any(t.name == name for t in self._types):
            raise ValueError(f"worker: type {name!r} registered twice")
        if not (isinstance(concurrency, int) and 1 <= concurrency <= 1024):
            raise ValueError(f"worker: type {name}: concurrency must be 1 to 1024")
        if not (float(timeout).is_integer() and timeout >= 1):
            raise ValueError(f"worker: type {name}: timeout must be a whole number of seconds >= 1")
        if not (isinstance(attempts, int) and attempts >= 1):
            raise ValueError(f"worker: type {name}: attempts must be at least 1")
        if not (isinstance(max_result_bytes, int) and max_result_bytes >= 1):
            raise ValueError(f"worker: type {name}: max_result_bytes must be at least 1")
        model = params if params is not None else _model_of(handler)
        if schema is None:
            if model is None:
                raise ValueError(f"worker: type {name}: give schema= or a params model")
            schema = schema_of(model)
        if not isinstance(schema, dict):
            raise TypeError(f"worker: type {name}: schema must be a JSON Schema object")
        decl: dict[str, Any] = {
            "name": name,
            "schema": schema,
            "timeout_seconds": int(timeout),
            "attempts": attempts,
            "max_result_bytes": max_result_bytes,
            "content_type": content_type,
        }
        if description:
            decl["description"] = description
        if retry:
            decl["retry"] = dict(retry)
        if concurrency_keys:
            decl["concurrency"] = [dict(k) for k in concurrency_keys]
        if rate_limit:
            decl["rate_limit"] = dict(rate_limit)
        self._types.append(TypeRunner(decl, concurrency, handler, model))

    def declaration(self, name: str) -> dict[str, Any]:
        """The declaration a type is sent with (its schema included)."""
        for t in self._types:
            if t.name == name:
                return dict(t.decl)
        raise KeyError(name)

    # -- running ---------------------------------------------------------------------------------

    def run(self) -> None:
        """Runs until SIGTERM or SIGINT (then stops gracefully: running jobs get ``drain_timeout`` to
        finish, the rest are given back). Blocks; use :meth:`run_async` inside an event loop."""
        asyncio.run(self.run_async())

    async def run_async(self, *, handle_signals: bool = True) -> None:
        """Starts, then runs until :meth:`stop` (or SIGTERM/SIGINT with ``handle_signals``) ends it."""
        await self.start()
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self._signalled, sig)
                    installed.append(sig)
        try:
            assert self._done is not None
            await self._done.wait()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    def _signalled(self, sig: signal.Signals) -> None:
        log.info("signal received, stopping", extra={"signal": sig.name})
        self._begin_stop()

    def _begin_stop(self) -> None:
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._do_stop())

    async def stop(self) -> None:
        """Stops taking work, lets running jobs finish for ``drain_timeout``, then aborts the rest
        (reason ``shutdown``; their jobs are given back for another worker) and waits as long again;
        attempts that still do not end are abandoned (their claims go stale and jobgate hands the jobs
        on). Says bye for every type and closes the connection."""
        self._begin_stop()
        assert self._stop_task is not None
        await asyncio.shield(self._stop_task)

    def request_stop(self) -> None:
        """:meth:`stop` from another thread (or a signal handler of your own); returns at once."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._begin_stop)

    async def start(self) -> None:
        """Connects, declares every registered type (a refused declaration raises its WireError at
        once) and starts taking work."""
        if self._started or self._stopping:
            raise RuntimeError("worker: already started")
        if not self._types:
            raise RuntimeError("worker: no types registered")
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        self._done = asyncio.Event()
        nc = NATS()
        await nc.connect(
            servers=self.servers,
            user=self.user,
            password=self.password,
            name=f"jobgate worker {self.name}",
            inbox_prefix=wire.inbox_prefix(self.credential),
            connect_timeout=int(max(1, self.connect_timeout)),
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.25,  # type: ignore[arg-type]
            error_cb=self._nats_error,
            allow_reconnect=True,
        )
        self._nc = nc
        try:
            for t in self._types:
                await self.call(
                    t.name, "declare", {"worker": self.name, "type": t.decl}, patient=True, stop=self._stop_event
                )
            if self._stopping:
                raise RuntimeError("worker: stopped while starting")
        except BaseException:
            await nc.close()
            self._nc = None
            self._done.set()
            raise
        self._started_at = datetime.now(UTC)
        await self._hello()
        self._hello_task = asyncio.ensure_future(self._hello_every())
        for t in self._types:
            for _ in range(t.concurrency):
                self._loops.append(asyncio.ensure_future(self._pull_loop(t, False)))
            for _ in range(self.newcomer_slots):
                self._loops.append(asyncio.ensure_future(self._pull_loop(t, True)))
            log.info("worker started", extra={"type": t.name, "concurrency": t.concurrency})

    async def _nats_error(self, e: Exception) -> None:
        # A publish the credential may not make is refused by the server asynchronously; the request
        # would only time out. Remember the subject so the call fails with "forbidden" instead.
        m = re.search(r'[Pp]ermissions [Vv]iolation for [Pp]ublish to "?([^"\s]+)', str(e))
        if m:
            self._denied.add(m.group(1))
        log.debug("nats error", extra={"err": str(e)})

    async def _do_stop(self) -> None:
        self._stopping = True
        if self._stop_event is not None:
            self._stop_event.set()
        try:
            if self._nc is None:
                return
            loops = asyncio.gather(*self._loops, return_exceptions=True)
            done, _ = await asyncio.wait([loops], timeout=self.drain_timeout)
            if not done:
                log.info("drain time over: interrupting running jobs", extra={"running": len(self._attempts)})
                for a in list(self._attempts):
                    a.abort("shutdown")
                done, _ = await asyncio.wait([loops], timeout=self.drain_timeout)
                if not done:
                    self._hard = True
                    log.warning(
                        "attempts did not end: abandoned, their claims go stale", extra={"running": len(self._attempts)}
                    )
                    for task in self._loops:
                        task.cancel()
            if self._hello_task is not None:
                self._hello_task.cancel()
            deadline = time.monotonic() + 2
            await asyncio.gather(
                *(self.call(t.name, "bye", {"worker": self.name}, timeout=2.0, deadline=deadline) for t in self._types),
                return_exceptions=True,
            )
            with contextlib.suppress(Exception):
                await self._nc.drain()
            log.info("worker stopped")
        finally:
            if self._done is not None:
                self._done.set()

    async def _hello_every(self) -> None:
        while True:
            await asyncio.sleep(10)
            await self._hello()

    async def _hello(self) -> None:
        async def one(t: TypeRunner) -> None:
            try:
                await self.call(
                    t.name,
                    "hello",
                    {
                        "worker": self.name,
                        "concurrency": t.concurrency,
                        "started_at": self._started_at.isoformat().replace("+00:00", "Z"),
                        "busy": t.running_jobs(),
                    },
                )
            except Exception as e:
                if not self._stopping:
                    log.warning("presence not announced", extra={"type": t.name, "err": str(e)})

        await asyncio.gather(*(one(t) for t in self._types))

    async def _sleep(self, seconds: float) -> None:
        """Sleeps, waking at once when the stop begins."""
        assert self._stop_event is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event.wait(), seconds)

    async def _pull_loop(self, t: TypeRunner, newcomer: bool) -> None:
        """Asks for one job at a time, so each free slot takes the tenant whose turn it is on jobgate's
        side. A request under way when the stop begins is answered before the loop ends; a job it
        brings is given back at once."""
        while not self._stopping:
            req: dict[str, Any] = {"worker": self.name, "wait_ms": int(self.pull_wait * 1000)}
            if newcomer:
                running = t.newcomer_request()
                if running is None:
                    await self._sleep(0.05)
                    continue
                req["newcomer"] = True
                if running:
                    req["running"] = running
            try:
                reply = await self.call(t.name, "next", req, timeout=self.pull_wait + 5)
            except Exception as e:
                if not self._stopping:
                    log.warning("asking for work failed", extra={"type": t.name, "err": str(e)})
                    await self._sleep(jitter(1.0))
                continue
            asg = reply.get("job")
            if asg is None:
                continue
            if not wire.valid_assignment(asg, t.name):
                log.error("jobgate answered an assignment this worker cannot read", extra={"type": t.name})
                continue
            if self._stopping:
                try:
                    await self.call(
                        t.name,
                        "giveback",
                        {"key": asg["key"], "token": asg["token"], "reason": "shutdown"},
                        patient=True,
                        deadline=time.monotonic() + wire.OP_TIMEOUT,
                    )
                except Exception as e:
                    log.warning("could not give the job back", extra={"job_id": asg["id"], "err": str(e)})
                continue
            t.started(asg["tenant"])
            if not newcomer:
                t.busy += 1
            try:
                await run_attempt(self, t, asg)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.error("attempt ended unexpectedly", extra={"job_id": asg["id"], "err": repr(e)})
            finally:
                if not newcomer:
                    t.busy -= 1
                t.ended(asg["tenant"])

    # -- requests --------------------------------------------------------------------------------

    async def call(
        self,
        typ: str,
        op: str,
        req: Any,
        *,
        timeout: float = wire.OP_TIMEOUT,
        patient: bool = False,
        deadline: float | None = None,
        stop: asyncio.Event | None = None,
    ) -> dict[str, Any]:
        """Sends one request of op about typ and returns its reply; a refusal raises WireError. With
        patient, no responders, timeouts and unavailable/throttled refusals are tried again, jittered
        (100 ms doubling to 2 s), until the deadline or the stop event."""
        data = json.dumps(req, separators=(",", ":")).encode()
        return await self.request(
            wire.subject(self.credential, typ, op), data, timeout=timeout, patient=patient, deadline=deadline, stop=stop
        )

    async def _request_once(
        self, nc: NATS, subj: str, data: bytes, timeout: float, headers: dict[str, str] | None
    ) -> Any:
        if not subj.endswith(".declare"):
            return await nc.request(subj, data, timeout=timeout, headers=headers)
        # A declaration is the first request of a type: one the credential may not publish (a
        # credential for other types) is refused by the server asynchronously, which would only
        # show as a timeout. Watch for the refusal meanwhile and fail at once with it.
        task = asyncio.ensure_future(nc.request(subj, data, timeout=timeout, headers=headers))
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.05)
            if done:
                return task.result()
            if subj in self._denied:
                task.cancel()
                raise wire.WireError("forbidden", f"this credential may not publish to {subj}")

    async def request(
        self,
        subj: str,
        data: bytes,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = wire.OP_TIMEOUT,
        patient: bool = False,
        deadline: float | None = None,
        stop: asyncio.Event | None = None,
    ) -> dict[str, Any]:
        nc = self._nc
        if nc is None:
            raise RuntimeError("worker: not connected")
        delay = 0.1
        while True:
            err: Exception
            try:
                msg = await self._request_once(nc, subj, data, timeout, headers)
                try:
                    reply = json.loads(msg.data)
                except ValueError as e:
                    raise RuntimeError(f"undecodable reply to {subj}") from e
                if not isinstance(reply, dict):
                    raise RuntimeError(f"undecodable reply to {subj}")
                refusal = reply.get("error")
                if isinstance(refusal, dict):
                    after = refusal.get("retry_after_ms")
                    raise wire.WireError(
                        str(refusal.get("code", "")),
                        str(refusal.get("message", "")),
                        reply.get("canceled") is True,
                        reply.get("failed") is True,
                        min(after / 1000, wire.MAX_RETRY_AFTER)
                        if isinstance(after, int | float) and not isinstance(after, bool) and after > 0
                        else 0.0,
                    )
                return reply
            except nats.errors.TimeoutError as e:
                if subj in self._denied:
                    raise wire.WireError("forbidden", f"this credential may not publish to {subj}") from e
                err = e
            except Exception as e:
                err = e
            left = float("inf") if deadline is None else deadline - time.monotonic()
            if (
                not patient
                or not (transient(err) or unavailable(err))
                or left <= 0
                or (stop is not None and stop.is_set())
                or nc.is_closed
            ):
                raise err
            # A refusal that says how long to wait (a declaration past its credential's limit of
            # changes) is asked again after it, not sooner.
            asked = err.retry_after if isinstance(err, wire.WireError) else 0.0
            pause = min(max(jitter(delay), asked), left)
            if stop is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)
            else:
                await asyncio.sleep(pause)
            delay = min(2 * delay, 2.0)
            if stop is not None and stop.is_set():
                raise err
