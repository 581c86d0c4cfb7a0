"""What Client and AsyncClient share: request bodies, identities, response decoding, SSE parsing."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx

from ._errors import ConflictError, UnexpectedResponseError, problem_from
from ._journal import Journal, KeyConflict, fingerprint, new_key
from ._models import Batch, Job, Page

JOBS = "/v1/jobs"
BATCHES = "/v1/batches"
USER_AGENT = "jobgate-python/0.1.0"

# How long an event stream may stay silent (the gateway sends a keep-alive every 15 s) before it is
# considered dead, and how long one long-poll waits for a change.
SSE_IDLE = 45.0
LONG_POLL = 20.0
# Broken event streams in a row before wait() long-polls instead.
SSE_MAX_FAILURES = 3

# A private hook for the SDK's own tests: JOBGATE_SDK_TEST_HOOK=<point>=<file> makes a submission
# write <file> at <point> ("journaled": its key is journaled and nothing is sent yet; "answered":
# the server answered and the journal does not know it yet) and then hang, for the test to kill it.
_HOOK = "JOBGATE_SDK_TEST_HOOK"


def test_hook(point: str) -> None:
    spec = os.environ.get(_HOOK, "")
    if not spec.startswith(point + "="):
        return
    marker = spec.split("=", 1)[1]
    with open(marker, "w") as f:
        f.write(point)
    time.sleep(3600)


def scope_of(base: str, token: str) -> str:
    """Whose submissions a journal entry holds: the gateway and the token's tenant and subject (read,
    not verified: the server verifies). A key is only ever resumed by the identity that made it."""
    who = ""
    parts = token.split(".")
    if len(parts) == 3:
        try:
            claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
            if isinstance(claims, dict) and claims.get("tenant") and claims.get("sub"):
                who = f"{claims['tenant']}/{claims['sub']}"
        except ValueError:
            pass
    if not who:
        who = "token:" + hashlib.sha256(token.encode()).hexdigest()[:16]
    return f"{base} {who}"


def _duration(d: timedelta) -> str:
    # A Go duration: whole milliseconds are exact enough for a delay.
    ms = round(d.total_seconds() * 1000)
    return f"{ms}ms"


def flow_fields(flow: Mapping[str, Any]) -> dict[str, Any]:
    """Flow control of a submission (run_at, delay, priority, start_by) as the body's fields."""
    out: dict[str, Any] = {}
    for k, v in flow.items():
        if v is None:
            continue
        if isinstance(v, datetime):
            if v.tzinfo is None:
                raise ValueError(f"{k}: a datetime with a time zone is needed")
            out[k] = v.isoformat()
        elif isinstance(v, timedelta):
            out[k] = _duration(v)
        else:
            out[k] = v
    return out


def job_body(typ: str, params: Any, flow: Mapping[str, Any]) -> dict[str, Any]:
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise TypeError("params must be a mapping (a JSON object)")
    return {"type": typ, "params": dict(params), **flow_fields(flow)}


def batch_body(items: list[Any], notify: str | None) -> dict[str, Any]:
    jobs: list[dict[str, Any]] = []
    for it in items:
        if isinstance(it, tuple):
            typ, params = it
            jobs.append(job_body(typ, params, {}))
        elif isinstance(it, Mapping):
            jobs.append(dict(it))
        else:
            raise TypeError("a batch item is a (type, params) tuple or a {'type', 'params', ...} mapping")
    body: dict[str, Any] = {"jobs": jobs}
    if notify:
        body["notify"] = notify
    return body


def valid_key(key: str) -> bool:
    return 1 <= len(key) <= 255 and all(0x20 < ord(c) < 0x7F for c in key)


def claim(
    journal: Journal | None, scope: str, path: str, typ: str, body: Any, key: str | None, fresh: bool
) -> tuple[str, bool]:
    """The key a submission sends, journaled before the first attempt."""
    if key is not None and not valid_key(key):
        raise ValueError("an idempotency key is 1-255 printable ASCII characters without spaces")
    if journal is None:
        return key or new_key(), False
    try:
        e, reused = journal.claim(scope, path, typ, fingerprint(body), key, fresh)
    except KeyConflict as c:
        raise ConflictError(
            409,
            type="/problems/idempotency-key-reused",
            title="Idempotency-Key already used for a different request",
            detail=str(c),
            job_id=c.entry.job_id,
        ) from None
    return e.key, reused


# Statuses after which a key is of no further use: the request itself is wrong, or the key belongs
# to another request. After 401, 403 and anything unforeseen the key stays journaled: a token that
# expired between a committed attempt and its retry must not cost the user their job.
DEFINITIVE_REFUSAL = frozenset({400, 409, 413, 415, 422})


def decode(resp: httpx.Response) -> dict[str, Any]:
    try:
        doc = resp.json()
    except ValueError as e:
        raise UnexpectedResponseError(f"HTTP {resp.status_code}: body is not JSON") from e
    if not isinstance(doc, dict):
        raise UnexpectedResponseError(f"HTTP {resp.status_code}: body is not a JSON object")
    return doc


def job_of(resp: httpx.Response, replayed: bool = False) -> Job:
    doc = decode(resp)
    if not doc.get("id") or not doc.get("state"):
        raise UnexpectedResponseError("job resource without id or state")
    return Job.from_json(doc, replayed=replayed)


def batch_of(resp: httpx.Response, replayed: bool = False) -> Batch:
    doc = decode(resp)
    if not doc.get("id"):
        raise UnexpectedResponseError("batch resource without id")
    return Batch.from_json(doc, replayed=replayed)


def page_of(resp: httpx.Response) -> Page:
    doc = decode(resp)
    return Page([Job.from_json(j) for j in doc.get("jobs") or [] if isinstance(j, dict)], doc.get("next_cursor"))


def expect(resp: httpx.Response, *ok: int) -> httpx.Response:
    """resp when its status is one of ok, else its problem raised."""
    if resp.status_code in ok:
        return resp
    if resp.status_code >= 400:
        raise problem_from(resp)
    raise UnexpectedResponseError(f"HTTP {resp.status_code}")


def job_path(job_id: str) -> str:
    return f"{JOBS}/{urllib.parse.quote(job_id, safe='')}"


def batch_path(batch_id: str) -> str:
    return f"{BATCHES}/{urllib.parse.quote(batch_id, safe='')}"


def admin_job_path(job_id: str) -> str:
    return f"/v1/admin/jobs/{urllib.parse.quote(job_id, safe='')}"


def query(**kw: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in kw.items():
        if v is None:
            continue
        out[k] = v.isoformat() if isinstance(v, datetime) else str(v)
    return out


@dataclass
class SSEEvent:
    name: str
    data: str
    id: str | None


class SSEParser:
    """Server-Sent Events, line by line (the WHATWG rules jobgate's streams need)."""

    def __init__(self) -> None:
        self._name = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> SSEEvent | None:
        line = line.rstrip("\r\n")
        if not line:
            if not self._data and not self._name:
                self._id = None
                return None
            ev = SSEEvent(self._name or "message", "\n".join(self._data), self._id)
            self._name, self._data, self._id = "", [], None
            return ev
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._name = value
        elif field == "data":
            self._data.append(value)
        elif field == "id" and "\0" not in value:
            self._id = value
        return None


def version_of(job: Job) -> str:
    """What makes a new version worth an on_update: state, attempt, update time, progress."""
    p = job.progress
    return f"{job.state}|{job.attempt}|{job.updated_at}|{p.done if p else ''}/{p.total if p else ''}"


def event_job(ev: SSEEvent) -> Job | None:
    """The job of a stream's event, None for events of no interest; a problem event raises."""
    if ev.name in ("job", "message"):
        try:
            doc = json.loads(ev.data)
        except ValueError as e:
            raise UnexpectedResponseError("event data is not a job resource") from e
        if not isinstance(doc, dict) or not doc.get("id"):
            raise UnexpectedResponseError("event data is not a job resource")
        return Job.from_json(doc)
    if ev.name in ("problem", "error"):
        detail = ""
        with contextlib.suppress(ValueError, AttributeError):
            detail = str(json.loads(ev.data).get("detail", ""))
        raise StreamBroken(f"event stream error: {detail}")
    return None


class StreamBroken(Exception):
    """An event stream that ended or broke before the job's end (reconnect)."""


def loggable(path: str) -> str:
    """path for a log line: a signed result link is a credential of its own, so its signature stays out."""
    return "/v1/results/…" if path.startswith("/v1/results/") else path


def resolve(base: str, location: str) -> str:
    return urllib.parse.urljoin(base + "/", location)
