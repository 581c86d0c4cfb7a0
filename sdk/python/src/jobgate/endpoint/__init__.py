"""Handlers of jobgate's endpoint types (docs/endpoints.md): verify, decode, answer.

jobgate POSTs each attempt of an endpoint type's job to the team's handler, signed as Standard
Webhooks: :func:`verify` checks the signature and the timestamp and decodes the body into an
:class:`Attempt`; :func:`result`, :func:`no_result`, :func:`reject` and :func:`retry_later` are the
answers jobgate understands. :func:`handle` is the whole exchange, framework free; the adapters
``jobgate.endpoint.flask``, ``jobgate.endpoint.fastapi`` and ``jobgate.endpoint.django`` wrap it
(install ``jobgate[flask]``, ``jobgate[fastapi]`` or ``jobgate[django]``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeGuard

from ._callback import AttemptLostError, Callback, CallbackError

__all__ = [
    "TOLERANCE",
    "Answer",
    "Attempt",
    "AttemptLostError",
    "Callback",
    "CallbackError",
    "Handler",
    "VerificationError",
    "Verifier",
    "accepted",
    "handle",
    "no_result",
    "reject",
    "result",
    "retry_later",
    "verify",
]

TOLERANCE = 300.0
"""Seconds a request's ``webhook-timestamp`` may be from this clock (replays are refused)."""


class VerificationError(ValueError):
    """The request is not a jobgate attempt signed with this endpoint's secret.

    ``reason`` is ``"signature"`` (missing or no match), ``"timestamp"`` (missing, or outside the
    tolerance) or ``"body"`` (signed, but not an attempt's JSON).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Attempt:
    """One attempt of a job, as jobgate sent it."""

    id: str
    type: str
    tenant: str
    requester: str
    attempt: int  # from 1
    attempts: int  # how many the job gets
    created_at: datetime
    params: dict[str, Any]  # validated against the type's schema, its defaults applied
    deadline: datetime  # when jobgate stops waiting for the answer
    webhook_id: str  # "<job id>.a<attempt>": the key of an attempt's work
    callback: str | None = None


def _header(headers: Mapping[str, str], name: str) -> str:
    v = headers.get(name)
    if v is None:
        # A plain dict may hold the names in any case; the frameworks' mappings do not care.
        for k, val in headers.items():
            if k.lower() == name:
                return val
        return ""
    return v


def _key(secret: str) -> bytes:
    try:
        key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError("an endpoint secret is whsec_ and base64") from e
    if not key:
        raise ValueError("an endpoint secret is whsec_ and base64")
    return key


def _time(v: Any, name: str) -> datetime:
    if not isinstance(v, str):
        raise VerificationError("body", f"job.{name} is not a time")
    try:
        return datetime.fromisoformat(v)
    except ValueError as e:
        raise VerificationError("body", f"job.{name} is not a time") from e


def _count(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _attempt(webhook_id: str, body: bytes) -> Attempt:
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise VerificationError("body", "the body is not JSON") from e
    job = doc.get("job") if isinstance(doc, dict) else None
    if not isinstance(job, dict):
        raise VerificationError("body", "the body has no job")
    strs = {k: job.get(k) for k in ("id", "type", "tenant", "requester")}
    attempt, attempts = job.get("attempt"), job.get("attempts")
    params = job.get("params", {})
    callback = doc.get("callback")
    if not all(isinstance(v, str) for v in strs.values()) or not strs["id"]:
        raise VerificationError("body", "the job's id, type, tenant or requester is missing")
    if not (_count(attempt) and _count(attempts)):
        raise VerificationError("body", "the job's attempt or attempts is missing")
    if not isinstance(params, dict) or not (callback is None or isinstance(callback, str)):
        raise VerificationError("body", "the job's params are not an object")
    return Attempt(
        id=str(strs["id"]),
        type=str(strs["type"]),
        tenant=str(strs["tenant"]),
        requester=str(strs["requester"]),
        attempt=attempt,
        attempts=attempts,
        created_at=_time(job.get("created_at"), "created_at"),
        params=params,
        deadline=_time(job.get("deadline"), "deadline"),
        webhook_id=webhook_id,
        callback=callback,
    )


class Verifier:
    """Verifies requests signed with one of ``secrets`` (two while a rotation lasts)."""

    def __init__(self, *secrets: str, tolerance: float = TOLERANCE) -> None:
        keys = [_key(s) for s in secrets for s in s.split()]
        if not keys:
            raise ValueError("no endpoint secret: give the whsec_ secret the type's declaration answered")
        self._keys = keys
        self.tolerance = tolerance

    def verify(self, headers: Mapping[str, str], body: bytes, *, now: float | None = None) -> Attempt:
        """The attempt ``body`` carries, once its signature and timestamp are checked.

        Raises :class:`VerificationError`; nothing of the body is looked at before the signature matched.
        """
        msg_id = _header(headers, "webhook-id")
        ts = _header(headers, "webhook-timestamp")
        sigs = _header(headers, "webhook-signature")
        if not msg_id or not sigs:
            raise VerificationError("signature", "the request is not signed (webhook-id, webhook-signature)")
        try:
            sent = int(ts)
        except ValueError as e:
            raise VerificationError("timestamp", "webhook-timestamp is not a Unix time") from e
        if abs((time.time() if now is None else now) - sent) > self.tolerance:
            raise VerificationError("timestamp", "webhook-timestamp is outside the tolerance (a replay?)")
        signed = f"{msg_id}.{ts}.".encode() + body
        wants = [base64.b64encode(hmac.new(k, signed, hashlib.sha256).digest()) for k in self._keys]
        ok = False
        for sig in sigs.split():
            version, _, value = sig.partition(",")
            if version != "v1":
                continue
            for want in wants:
                # Every comparison runs, in constant time: no early exit tells which secret matched.
                ok |= hmac.compare_digest(value.encode(), want)
        if not ok:
            raise VerificationError("signature", "no signature matches this endpoint's secret")
        return _attempt(msg_id, body)


def verify(
    secret: str | Sequence[str],
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance: float = TOLERANCE,
    now: float | None = None,
) -> Attempt:
    """Checks a request jobgate sent (``body``: the exact bytes received) and decodes its attempt.

    ``secret`` is the type's ``whsec_...`` secret, or several (a sequence, or space separated) while a
    rotation lasts. Raises :class:`VerificationError`.
    """
    secrets = [secret] if isinstance(secret, str) else list(secret)
    return Verifier(*secrets, tolerance=tolerance).verify(headers, body, now=now)


@dataclass(frozen=True)
class Answer:
    """An answer to jobgate: the status, headers and body a framework sends as they are."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def result(body: bytes | str) -> Answer:
    """Succeeds the job with ``body`` as its result (stored with the type's declared content type)."""
    return Answer(200, body.encode() if isinstance(body, str) else body)


def accepted() -> Answer:
    """Goes on in the background (202): report through ``Callback(attempt.callback)`` (beat within 30 s)."""
    return Answer(202)


def no_result() -> Answer:
    """Succeeds the job without a result."""
    return Answer(204)


def _problem(status: int, title: str, detail: str) -> Answer:
    doc = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    return Answer(status, json.dumps(doc).encode(), {"Content-Type": "application/problem+json"})


def reject(detail: str, status: int = 422) -> Answer:
    """Fails the job without another attempt (``endpoint_rejected``); its owner reads ``detail``."""
    if not 400 <= status < 500 or status in (408, 425, 429):
        raise ValueError("a refusal is a 4xx status jobgate does not retry")
    return _problem(status, "Rejected", detail)


def retry_later(after: float | timedelta) -> Answer:
    """Fails this attempt and asks for another, not before ``after`` (jobgate waits its backoff if longer)."""
    seconds = after.total_seconds() if isinstance(after, timedelta) else after
    return Answer(503, b"", {"Retry-After": str(max(0, math.ceil(seconds)))})


Handler = Callable[[Attempt], "Answer | bytes | str | None"]
"""An attempt's work: an :class:`Answer`, or the result's bytes (or text), or ``None`` for no result."""


def answer_of(out: Answer | bytes | str | None) -> Answer:
    """What a handler returned, as an :class:`Answer`."""
    if out is None:
        return no_result()
    if isinstance(out, Answer):
        return out
    return result(out)


def refusal(err: VerificationError) -> Answer:
    """The answer to a request that did not verify: 401 for a signature or timestamp, else 400."""
    if err.reason == "body":
        return _problem(400, "Bad Request", "the request is not a jobgate attempt")
    return _problem(401, "Unauthorized", "the request is not signed with this endpoint's secret")


def handle(verifier: Verifier, fn: Handler, headers: Mapping[str, str], body: bytes) -> Answer:
    """The whole exchange: verify, run ``fn`` on the attempt, answer (the adapters' core)."""
    try:
        a = verifier.verify(headers, body)
    except VerificationError as e:
        return refusal(e)
    return answer_of(fn(a))


def secrets_of(secret: str | Sequence[str] | Verifier) -> Verifier:
    """A :class:`Verifier` of ``secret`` (one, several, or a verifier already)."""
    if isinstance(secret, Verifier):
        return secret
    return Verifier(*([secret] if isinstance(secret, str) else secret))
