"""An asynchronous attempt's reports (docs/endpoints.md, "Asynchronous answers (202)")."""

from __future__ import annotations

import time
from typing import Any

import httpx

__all__ = ["AttemptLostError", "Callback", "CallbackError"]


class CallbackError(Exception):
    """jobgate refused a callback: ``status`` and the problem's ``slug`` (``not-found``, ``payload-too-large``...)."""

    def __init__(self, status: int, slug: str, detail: str) -> None:
        super().__init__(f"{status} {slug}: {detail}" if detail else f"{status} {slug}")
        self.status, self.slug, self.detail = status, slug, detail


class AttemptLostError(CallbackError):
    """The attempt is no longer the job's current one (ended, quiet for 30 s, timed out, taken over, or
    ``canceled`` by its owner): nothing changed; stop working on it."""

    def __init__(self, status: int, slug: str, detail: str, canceled: bool) -> None:
        super().__init__(status, slug, detail)
        self.canceled = canceled


class Callback:
    """Reports of the attempt whose request carried ``url`` (``Attempt.callback``), after answering it with
    :func:`jobgate.endpoint.accepted`: beat at least every 10 s (any report counts), then ``done`` (after
    ``result`` if there is one) or ``fail``. The URL is the attempt's only credential: keep it out of logs.
    A ``503`` (not relayed in time) and a broken connection are sent again, up to ``tries`` times."""

    def __init__(self, url: str, *, timeout: float = 15.0, tries: int = 3, http: httpx.Client | None = None) -> None:
        if not url:
            raise ValueError("this request carries no callback URL: the deployment offers no asynchronous answers")
        self.url = url.rstrip("/")
        self.tries = tries
        self._http = http or httpx.Client(timeout=timeout, follow_redirects=False)
        self._own = http is None

    def __enter__(self) -> Callback:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._own:
            self._http.close()

    def beat(self, done: int | None = None, total: int | None = None, unit: str | None = None) -> None:
        """Says the attempt is alive, with its progress when ``done`` and ``total`` are given."""
        body: dict[str, Any] | None = None
        if done is not None and total is not None:
            progress: dict[str, Any] = {"done": done, "total": total}
            if unit:
                progress["unit"] = unit
            body = {"progress": progress}
        self._send("POST", "/beat", json=body)

    def result(self, data: bytes | str) -> None:
        """Uploads the result (once; at most the type's ``max_result_bytes`` and 1 MiB)."""
        self._send("PUT", "/result", content=data.encode() if isinstance(data, str) else data)

    def done(self) -> None:
        """Succeeds the job, with the result uploaded before if any."""
        self._send("POST", "/done")

    def fail(self, message: str, user_message: str | None = None, retryable: bool | None = None) -> None:
        """Fails the attempt: retried while attempts remain unless ``retryable`` is ``False``; ``message`` is the
        operator's, ``user_message`` the job owner's."""
        body: dict[str, Any] = {"message": message}
        if user_message is not None:
            body["user_message"] = user_message
        if retryable is not None:
            body["retryable"] = retryable
        self._send("POST", "/fail", json=body)

    def _send(self, method: str, path: str, **kw: Any) -> None:
        for i in range(self.tries):
            last = i == self.tries - 1
            try:
                r = self._http.request(method, self.url + path, **kw)
            except httpx.TransportError:
                if last:
                    raise
                time.sleep(0.2 * 2**i)
                continue
            if r.status_code == 503 and not last:
                time.sleep(0.2 * 2**i)
                continue
            if r.is_success:
                return
            try:
                doc = r.json()
            except ValueError:
                doc = {}
            if not isinstance(doc, dict):
                doc = {}
            slug = str(doc.get("type", "")).rsplit("/", 1)[-1] or str(r.status_code)
            detail = str(doc.get("detail", ""))
            if r.status_code == 409:
                raise AttemptLostError(r.status_code, slug, detail, bool(doc.get("canceled")))
            raise CallbackError(r.status_code, slug, detail)
