"""AsyncClient: the HTTP API with asyncio (httpx.AsyncClient). Client (_client.py) is its blocking twin:
a change here is made there too."""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx

from . import _core as core
from ._errors import (
    DigestMismatchError,
    GoneError,
    JobgateError,
    NotConfirmedError,
    NotFoundError,
    ProblemError,
    UnexpectedResponseError,
    WaitTimeoutError,
    problem_from,
)
from ._journal import Journal, new_key
from ._models import Batch, Job, Page, Result
from ._retry import RetryPolicy, retry_after, retryable_status

log = logging.getLogger("jobgate")

JournalArg = str | os.PathLike[str] | Journal | None | bool


def journal_of(journal: JournalArg) -> Journal | None:
    if journal is False:
        return None
    if journal is None or journal is True:
        return Journal()
    if isinstance(journal, Journal):
        return journal
    return Journal(journal)


class AsyncClient:
    """The jobgate HTTP API for asyncio code.

    ``journal`` is where made-up idempotency keys are kept until their job is known (default
    ``~/.local/state/jobgate/journal.sqlite``; a path, a :class:`Journal`, or ``False`` for none).
    Requests whose outcome is unknown or transient (connection errors, 408, 425, 429, 5xx but 501/505)
    are retried with full-jitter backoff, never sooner than the server's ``Retry-After``, within
    ``retry.max_elapsed``.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        journal: JournalArg = None,
        retry: RetryPolicy | None = None,
        http: httpx.AsyncClient | None = None,
        user_agent: str = core.USER_AGENT,
    ) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self.journal = journal_of(journal)
        self.retry = retry or RetryPolicy()
        self._http = http or httpx.AsyncClient(follow_redirects=False)
        self._own_http = http is None
        self._ua = user_agent
        self._scope = core.scope_of(self.url, token)
        self.admin = AsyncAdmin(self)

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- transport -------------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        auth: bool = True,
        timeout: float | httpx.Timeout | None = None,
    ) -> httpx.Request:
        url = path if path.startswith(("http://", "https://")) else self.url + path
        h = {"User-Agent": self._ua, **(headers or {})}
        if auth:
            h["Authorization"] = f"Bearer {self._token}"
        t = timeout if timeout is not None else self.retry.attempt_timeout
        return self._http.build_request(method, url, headers=h, json=json, params=params, timeout=t)

    async def _send(self, req: httpx.Request, *, stream: bool = False) -> httpx.Response:
        """req, retried while that is safe; the first answer with any other status is returned (its
        body read unless stream). Gives up with the last failure."""
        start = time.monotonic()
        n = 0
        while True:
            err: Exception
            wait: float | None = None
            try:
                resp = await self._http.send(req, stream=True)
            except httpx.TransportError as e:
                if isinstance(e, httpx.UnsupportedProtocol):
                    raise
                err = e
            else:
                if not retryable_status(resp.status_code):
                    if not stream or resp.status_code >= 400:
                        try:
                            await resp.aread()
                        finally:
                            await resp.aclose()
                    return resp
                try:
                    await resp.aread()
                finally:
                    await resp.aclose()
                err = problem_from(resp)
                wait = retry_after(resp.headers.get("Retry-After"))
            n += 1
            elapsed = time.monotonic() - start
            left = self.retry.max_elapsed - elapsed
            if (self.retry.max_attempts and n >= self.retry.max_attempts) or left <= 0 or (wait or 0) > left:
                raise err
            delay = min(self.retry.backoff(n - 1, wait), left)
            log.warning(
                "request failed, retrying",
                extra={
                    "method": req.method,
                    "path": core.loggable(req.url.path),
                    "attempt": n,
                    "delay": round(delay, 3),
                    "err": str(err),
                },
            )
            await anyio.sleep(delay)

    # -- jobs ------------------------------------------------------------------------------------

    async def submit(
        self,
        type: str,
        params: Mapping[str, Any] | None = None,
        key: str | None = None,
        *,
        fresh: bool = False,
        **flow: Any,
    ) -> Job:
        """Asks for a job of ``type``; ``flow`` takes ``run_at``, ``delay``, ``priority``, ``start_by``.

        The idempotency key is chosen once — ``key``, the key of an unfinished identical submission in
        the journal (a rerun after a crash), or a new one (``fresh=True`` for a deliberate second job)
        — and journaled before the first attempt; every retry sends it. 409 raises
        :class:`ConflictError`, 422 :class:`ValidationError`; without a definitive answer
        :class:`NotConfirmedError`, and the key stays journaled.
        """
        body = core.job_body(type, params, flow)
        k, reused = core.claim(self.journal, self._scope, core.JOBS, type, body, key, fresh)
        if reused:
            log.info("resuming an unfinished submission from the journal")
        resp = await self._post_keyed(core.JOBS, body, k)
        job = core.job_of(resp, replayed=resp.headers.get("Idempotent-Replayed") == "true")
        self._record(k, job.id, job.terminal)
        return job

    async def _post_keyed(self, path: str, body: Any, key: str) -> httpx.Response:
        core.test_hook("journaled")
        try:
            resp = await self._send(self._request("POST", path, headers={"Idempotency-Key": key}, json=body))
        except (httpx.TransportError, ProblemError) as e:
            raise NotConfirmedError(f"submission not confirmed: {e}", key, self.journal is not None, e) from e
        core.test_hook("answered")
        if resp.status_code in (200, 201, 202):
            return resp
        perr = problem_from(resp)
        if resp.status_code in core.DEFINITIVE_REFUSAL:
            if self.journal is not None:
                self.journal.forget(key)
            raise perr
        raise NotConfirmedError(f"submission not confirmed: {perr}", key, self.journal is not None, perr) from perr

    def _record(self, key: str, job_id: str, ended: bool) -> None:
        if self.journal is None:
            return
        try:
            self.journal.record(key, job_id, ended)
        except Exception as e:
            # The job exists and the caller gets it; an unrecorded answer only means a rerun replays it.
            log.warning("journal not updated", extra={"job_id": job_id, "err": str(e)})

    def _seen(self, job: Job) -> None:
        if job.terminal and self.journal is not None:
            with contextlib.suppress(Exception):
                self.journal.finished(job.id)

    async def get(self, job_id: str) -> Job:
        resp = core.expect(await self._send(self._request("GET", core.job_path(job_id))), 200)
        job = core.job_of(resp)
        self._seen(job)
        return job

    async def list(
        self, state: str | None = None, limit: int | None = None, cursor: str | None = None, type: str | None = None
    ) -> Page:
        """The requester's own jobs, newest first."""
        q = core.query(state=state, limit=limit, cursor=cursor, type=type)
        return core.page_of(core.expect(await self._send(self._request("GET", core.JOBS, params=q)), 200))

    async def cancel(self, job_id: str) -> Job:
        """Cancels a queued or running job (202); a finished one raises ConflictError (job-terminal)."""
        resp = await self._send(self._request("DELETE", core.job_path(job_id)))
        return core.job_of(core.expect(resp, 200, 202))

    async def wait(
        self, job_id: str, timeout: float | None = None, on_update: Callable[[Job], None] | None = None
    ) -> Job:
        """Follows the job until it ends and returns it: its Server-Sent Events, reconnecting with
        Last-Event-ID, else long-polls. ``on_update`` gets each new version. Past ``timeout`` seconds
        it raises :class:`WaitTimeoutError` (a ``TimeoutError``) with the last version seen."""
        w = _AsyncWaiter(self, job_id, on_update)
        try:
            with anyio.fail_after(timeout):
                job = await w.run()
        except TimeoutError as e:
            if isinstance(e, WaitTimeoutError):
                raise
            raise WaitTimeoutError(f"job {job_id} did not end within {timeout}s", w.latest) from None
        self._seen(job)
        return job

    async def download(self, job_id: str, path: str | os.PathLike[str]) -> Result:
        """Writes a succeeded job's result to ``path``: the 303 of ``/v1/jobs/{id}/result`` followed to
        its signed link (sent without the token), the bytes checked against the job's size and SHA-256,
        then moved into place. A job without a result raises ConflictError (result-not-ready,
        job-failed, job-canceled)."""
        job = await self.get(job_id)
        for tries in range(3):
            try:
                return await self._download(job_id, job, Path(path))
            except GoneError as e:
                if e.slug != "link-expired" or tries == 2:
                    raise
        raise AssertionError("unreachable")

    async def _download(self, job_id: str, job: Job, dest: Path) -> Result:
        resp = await self._send(self._request("GET", core.job_path(job_id) + "/result"))
        if resp.status_code not in (302, 303, 307):
            core.expect(resp)
        loc = resp.headers.get("Location")
        if not loc:
            raise UnexpectedResponseError("redirect without Location")
        req = self._request("GET", core.resolve(self.url, loc), auth=False)
        resp = core.expect(await self._send(req, stream=True), 200)
        h, n = hashlib.sha256(), 0
        fd, tmp = tempfile.mkstemp(prefix=".jobgate-", dir=dest.parent or ".")
        try:
            with os.fdopen(fd, "wb") as f:
                try:
                    async for chunk in resp.aiter_bytes(1 << 16):
                        f.write(chunk)
                        h.update(chunk)
                        n += len(chunk)
                finally:
                    await resp.aclose()
            want = job.result
            if want is not None and (want.size != n or want.sha256 != h.hexdigest()):
                raise DigestMismatchError(
                    f"result of {job_id}: got {n} bytes ({h.hexdigest()}), announced {want.size} ({want.sha256})"
                )
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        ctype = resp.headers.get("Content-Type", want.content_type if want else "")
        return Result(
            content_type=ctype, size=n, sha256=h.hexdigest(), href=None, expires_at=want.expires_at if want else None
        )

    # -- batches ---------------------------------------------------------------------------------

    async def submit_batch(
        self, items: builtins.list[Any], key: str | None = None, *, notify: str | None = None, fresh: bool = False
    ) -> Batch:
        """Submits 1 to 1,000 items at once, each a ``(type, params)`` tuple or a mapping with
        ``type``, ``params`` and flow fields; all admitted or none (one invalid item: 422 naming it as
        ``/jobs/3/params/...``). Keyed and journaled like :meth:`submit`."""
        body = core.batch_body(items, notify)
        k, _ = core.claim(self.journal, self._scope, core.BATCHES, "batch", body, key, fresh)
        resp = await self._post_keyed(core.BATCHES, body, k)
        b = core.batch_of(resp, replayed=resp.headers.get("Idempotent-Replayed") == "true")
        self._record(k, b.id, b.done)
        return b

    async def get_batch(self, batch_id: str, limit: int | None = None, cursor: str | None = None) -> Batch:
        q = core.query(limit=limit, cursor=cursor)
        resp = await self._send(self._request("GET", core.batch_path(batch_id), params=q))
        return core.batch_of(core.expect(resp, 200))

    async def cancel_batch(self, batch_id: str) -> Batch:
        resp = await self._send(self._request("DELETE", core.batch_path(batch_id)))
        return core.batch_of(core.expect(resp, 200, 202))


class _AsyncWaiter:
    def __init__(self, c: AsyncClient, job_id: str, on_update: Callable[[Job], None] | None) -> None:
        self.c, self.id, self.on_update = c, job_id, on_update
        self.last = ""
        self.event_id: str | None = None
        self.latest: Job | None = None

    def deliver(self, job: Job) -> bool:
        self.latest = job
        v = core.version_of(job)
        if v != self.last:
            self.last = v
            if self.on_update is not None:
                self.on_update(job)
        return job.terminal

    async def run(self) -> Job:
        failures = 0
        while failures < core.SSE_MAX_FAILURES:
            try:
                job = await self.stream()
            except _NoStream:
                return await self.poll()
            except NotFoundError:
                return await self.poll()
            except (httpx.TransportError, core.StreamBroken, UnexpectedResponseError, ProblemError) as e:
                if isinstance(e, ProblemError) and e.status in (401, 403):
                    raise
                failures += 1
                ra = e.retry_after if isinstance(e, ProblemError) else None
                log.debug("event stream ended early, reconnecting", extra={"job_id": self.id, "err": str(e)})
                await anyio.sleep(self.c.retry.backoff(failures - 1, ra))
                continue
            if job is not None:
                return job
            failures = 0  # it delivered before it ended cleanly
        log.info("event stream keeps breaking, polling instead", extra={"job_id": self.id})
        return await self.poll()

    async def stream(self) -> Job | None:
        h = {"Accept": "text/event-stream"}
        if self.event_id:
            h["Last-Event-ID"] = self.event_id
        timeout = httpx.Timeout(self.c.retry.attempt_timeout, read=core.SSE_IDLE)
        req = self.c._request("GET", core.job_path(self.id) + "/events", headers=h, timeout=timeout)
        resp = await self.c._send(req, stream=True)
        if resp.status_code == 204:
            await resp.aclose()
            raise _NoStream  # the terminal event was ours already: one read gets the end
        if resp.status_code in (405, 406, 501):
            raise _NoStream
        core.expect(resp, 200)
        if not resp.headers.get("Content-Type", "").startswith("text/event-stream"):
            await resp.aclose()
            raise _NoStream
        parser = core.SSEParser()
        got = False
        try:
            async for line in resp.aiter_lines():
                ev = parser.feed(line)
                if ev is None:
                    continue
                if ev.id:
                    self.event_id = ev.id
                job = core.event_job(ev)
                if job is None:
                    continue
                got = True
                if self.deliver(job):
                    return job
        finally:
            await resp.aclose()
        if not got:
            raise core.StreamBroken("event stream ended without an event")
        return None

    async def poll(self) -> Job:
        etag = ""
        interval = 1.0
        while True:
            start = time.monotonic()
            h = {"If-None-Match": etag} if etag else {}
            q = {"wait": f"{int(core.LONG_POLL)}s"} if etag else None
            req = self.c._request(
                "GET",
                core.job_path(self.id),
                headers=h,
                params=q,
                timeout=self.c.retry.attempt_timeout + core.LONG_POLL,
            )
            resp = core.expect(await self.c._send(req), 200, 304)
            if resp.status_code == 200:
                job = core.job_of(resp)
                if self.deliver(job):
                    return job
            etag = resp.headers.get("ETag", etag)
            ra = retry_after(resp.headers.get("Retry-After"))
            if ra:
                interval = ra
            left = start + interval - time.monotonic()
            if left > 0:
                await anyio.sleep(left)


class _NoStream(JobgateError):
    pass


class AsyncAdmin:
    """The admin API (``/v1/admin``) for a tenant admin's or an operator's token."""

    def __init__(self, c: AsyncClient) -> None:
        self._c = c

    async def list_jobs(
        self,
        *,
        tenant: str | None = None,
        requester: str | None = None,
        type: str | None = None,
        state: str | None = None,
        category: str | None = None,
        created_after: Any = None,
        created_before: Any = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page:
        q = core.query(
            tenant=tenant,
            requester=requester,
            type=type,
            state=state,
            category=category,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            cursor=cursor,
        )
        resp = await self._c._send(self._c._request("GET", "/v1/admin/jobs", params=q))
        return core.page_of(core.expect(resp, 200))

    async def get_job(self, job_id: str) -> Job:
        resp = await self._c._send(self._c._request("GET", core.admin_job_path(job_id)))
        return core.job_of(core.expect(resp, 200))

    async def cancel(self, job_id: str) -> Job:
        resp = await self._c._send(self._c._request("POST", core.admin_job_path(job_id) + "/cancel"))
        return core.job_of(core.expect(resp, 200, 202))

    async def retry(self, job_id: str, key: str | None = None) -> Job:
        """A new job from a failed or canceled one (``retry_of`` names the old one). The key is chosen
        once and sent on every attempt, so the call makes one job; the same key again answers the same
        new job (``replayed``)."""
        k = key or new_key()
        req = self._c._request("POST", core.admin_job_path(job_id) + "/retry", headers={"Idempotency-Key": k})
        try:
            resp = await self._c._send(req)
        except (httpx.TransportError, ProblemError) as e:
            raise NotConfirmedError(f"retry not confirmed: {e}", k, False, e) from e
        core.expect(resp, 200, 201)
        return core.job_of(resp, replayed=resp.status_code == 200)

    async def stats(self, tenant: str | None = None) -> dict[str, Any]:
        resp = await self._c._send(self._c._request("GET", "/v1/admin/stats", params=core.query(tenant=tenant)))
        return core.decode(core.expect(resp, 200))
