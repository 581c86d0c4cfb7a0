"""The result of one attempt, streamed to jobgate through ``open`` and ``up.<host>.<id>``."""

from __future__ import annotations

import asyncio
import hashlib
import io
import threading
import time
from typing import TYPE_CHECKING, Any

import nats.errors

from . import _wire as wire
from ._retry import jitter

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

    from ._worker import Worker

# A result up to this size is also kept in memory, to store it again when the store broke the
# upload off.
KEPT_MAX = 16 << 20


class ResultTooLargeError(Exception):
    """A write past the type's ``max_result_bytes``: the job fails (``budget_exceeded``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"result exceeds the type's size limit of {limit} bytes")


class StoreOutageError(Exception):
    """The result store was unavailable: the attempt reached no verdict (the job is given back)."""


def transient(err: BaseException) -> bool:
    """A transport failure worth trying again: no responders, a timeout, a reconnect."""
    return isinstance(
        err,
        nats.errors.TimeoutError
        | nats.errors.NoRespondersError
        | nats.errors.ConnectionReconnectingError
        | nats.errors.StaleConnectionError
        | asyncio.TimeoutError,
    )


def unavailable(err: BaseException) -> bool:
    return isinstance(err, wire.WireError) and err.code in ("unavailable", "throttled")


class Upload:
    """Counts, hashes and streams what the handler writes, in chunks of CHUNK_SIZE (the last one
    shorter, perhaps empty, with Jobgate-Last), each sent once the previous one was answered. Keeps a
    copy while the output is at most KEPT_MAX. Runs on the worker's event loop."""

    def __init__(self, w: Worker, typ: str, held: dict[str, str], limit: int, deadline: float) -> None:
        self.w, self.type, self.held, self.limit, self.deadline = w, typ, held, limit, deadline
        self.n = 0
        self._hash = hashlib.sha256()
        self.too_large = False
        self.refused = False
        self.stored: dict[str, Any] | None = None
        self.broken: StoreOutageError | None = None
        self._kept: list[bytes] | None = []
        self._kept_len = 0
        self._pending = bytearray()
        self._target: dict[str, Any] | None = None
        self._seq = 0
        self._lock = asyncio.Lock()

    def sum(self) -> str:
        return self._hash.hexdigest()

    def kept_copy(self) -> bytes | None:
        return b"".join(self._kept) if self._kept is not None else None

    async def take(self, chunk: bytes) -> None:
        async with self._lock:
            if self.too_large or self.n + len(chunk) > self.limit:
                self.too_large = True
                raise ResultTooLargeError(self.limit)
            self.n += len(chunk)
            self._hash.update(chunk)
            if self._kept is not None:
                if self._kept_len + len(chunk) > KEPT_MAX:
                    self._kept, self._kept_len = None, 0
                else:
                    self._kept.append(chunk)
                    self._kept_len += len(chunk)
            if self.broken is not None:
                if self._kept is None:
                    raise self.broken
                return
            self._pending += chunk
            while len(self._pending) >= wire.CHUNK_SIZE:
                data = bytes(self._pending[: wire.CHUNK_SIZE])
                del self._pending[: wire.CHUNK_SIZE]
                try:
                    await self._send(data, last=False)
                except StoreOutageError as e:
                    self.broken = e
                    self._pending.clear()
                    if self._kept is None:
                        raise
                    return

    async def finish(self) -> None:
        async with self._lock:
            if self.broken is not None:
                if self._kept is None:
                    raise self.broken
                return
            data = bytes(self._pending)
            self._pending.clear()
            try:
                await self._send(data, last=True)
            except StoreOutageError as e:
                if self._kept is not None:
                    self.broken = e
                    return
                raise

    async def _open(self) -> dict[str, Any]:
        try:
            reply = await self.w.call(self.type, "open", self.held, patient=True, deadline=self.deadline)
        except Exception as e:
            if transient(e) or unavailable(e):
                raise StoreOutageError(str(e)) from e
            raise
        u = reply.get("upload")
        if not isinstance(u, dict) or not wire.valid_token(u.get("host")) or not wire.valid_token(u.get("id")):
            raise RuntimeError("jobgate answered no upload")
        return u

    async def _send(self, data: bytes, last: bool) -> None:
        if self._target is None:
            self._target = await self._open()
            self._seq = 0
        headers = {wire.HEADER_SEQ: str(self._seq)}
        if last:
            headers[wire.HEADER_LAST] = "1"
        subj = wire.upload_subject(self.w.credential, self.type, self._target["host"], self._target["id"])
        try:
            reply = await self.w.request(subj, data, headers=headers, timeout=wire.OP_TIMEOUT)
        except wire.WireError as e:
            if e.code == "unavailable":
                raise StoreOutageError(str(e)) from e
            if e.code == "too_large":
                self.too_large = True
                self.refused = e.failed
            raise
        except Exception as e:
            if transient(e):
                raise StoreOutageError(str(e)) from e
            raise
        self._seq += 1
        if last:
            stored = reply.get("stored")
            if not isinstance(stored, dict):
                raise RuntimeError("jobgate answered the last chunk without the stored result")
            self.stored = stored

    async def store_again(self, copy: bytes) -> dict[str, Any]:
        """Uploads the kept copy again, from the start with a new open, while the store is
        unavailable, until the deadline."""
        delay = 0.1
        while True:
            self._target, self.stored = None, None
            try:
                off = 0
                while True:
                    end = min(off + wire.CHUNK_SIZE, len(copy))
                    last = end == len(copy) and (end - off < wire.CHUNK_SIZE or off == len(copy))
                    await self._send(copy[off:end], last)
                    off = end
                    if last:
                        break
                assert self.stored is not None
                return self.stored
            except StoreOutageError:
                if time.monotonic() >= self.deadline:
                    raise
            await asyncio.sleep(min(jitter(delay), max(0.0, self.deadline - time.monotonic())))
            delay = min(2 * delay, 2.0)


class Output(io.RawIOBase):
    """The result as a binary file to write, streamed to jobgate as it is written (large outputs never
    sit in memory). From a sync handler ``write`` blocks until the chunk is taken; an async handler
    uses ``await out.awrite(data)`` (``write`` works there too, but queues without backpressure).
    ``close`` only ends writing: the attempt completes the upload when the handler returns."""

    def __init__(self, upload: Upload, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._up = upload
        self._loop = loop
        self._tail: asyncio.Future[None] | None = None
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def _in_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def write(self, b: ReadableBuffer, /) -> int:
        if self.closed:
            raise ValueError("write to a closed output")
        data = bytes(b)
        if not data:
            return 0
        if self._in_loop():
            self._queue(data)
        else:
            asyncio.run_coroutine_threadsafe(self._up.take(data), self._loop).result()
        return len(data)

    def _queue(self, data: bytes) -> None:
        prev = self._tail
        if prev is not None and prev.done() and prev.exception() is not None:
            raise prev.exception()  # type: ignore[misc]

        async def chain() -> None:
            if prev is not None:
                await prev
            await self._up.take(data)

        self._tail = asyncio.ensure_future(chain())

    async def awrite(self, b: ReadableBuffer) -> int:
        """Writes and waits until the chunk was taken (backpressure for async handlers)."""
        if self.closed:
            raise ValueError("write to a closed output")
        data = bytes(b)
        if self._tail is not None:
            await self._tail
            self._tail = None
        if data:
            await self._up.take(data)
        return len(data)

    async def drain(self) -> None:
        """Waits for writes queued by ``write`` from an async handler."""
        if self._tail is not None:
            tail, self._tail = self._tail, None
            await tail

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return self._up.n
