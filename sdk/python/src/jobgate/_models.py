"""The resources of the HTTP API as typed dataclasses (docs/api.md, gateway/openapi.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["TERMINAL_STATES", "Attempt", "Batch", "BatchCounts", "Job", "JobError", "Page", "Progress", "Result"]

TERMINAL_STATES = frozenset({"succeeded", "failed", "canceled"})


def _time(v: Any) -> datetime | None:
    if not isinstance(v, str) or not v:
        return None
    return datetime.fromisoformat(v.replace("Z", "+00:00"))


def _int(v: Any) -> int:
    return int(v) if isinstance(v, int | float) else 0


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    unit: str = ""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Progress:
        return cls(_int(d.get("done")), _int(d.get("total")), str(d.get("unit") or ""))


@dataclass(frozen=True)
class JobError:
    """Why a job failed (or was canceled by its deadline): ``category`` is one of the contract's
    (timeout, render_error, handler_error, worker_lost, ...); ``message`` is written for the job's owner."""

    category: str
    message: str
    retryable: bool = False

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> JobError:
        return cls(str(d.get("category") or ""), str(d.get("message") or ""), bool(d.get("retryable")))


@dataclass(frozen=True)
class Result:
    """A succeeded job's result: ``href`` is a freshly signed short-lived link (absent in events)."""

    content_type: str
    size: int
    sha256: str
    href: str | None = None
    expires_at: datetime | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Result:
        return cls(
            content_type=str(d.get("content_type") or ""),
            size=_int(d.get("size")),
            sha256=str(d.get("sha256") or ""),
            href=d.get("href") or None,
            expires_at=_time(d.get("expires_at")),
        )


@dataclass(frozen=True)
class Attempt:
    """One attempt of a job, as the admin API lists it."""

    attempt: int
    worker: str
    started_at: datetime | None
    ended_at: datetime | None
    outcome: str
    error: JobError | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Attempt:
        err = d.get("error")
        return cls(
            attempt=_int(d.get("attempt")),
            worker=str(d.get("worker") or ""),
            started_at=_time(d.get("started_at")),
            ended_at=_time(d.get("ended_at")),
            outcome=str(d.get("outcome") or ""),
            error=JobError.from_json(err) if isinstance(err, dict) else None,
        )


@dataclass(frozen=True)
class Job:
    """A job resource. ``replayed`` is set on a submit the server answered from an earlier request with
    the same key (``200``, ``Idempotent-Replayed: true``). The admin API adds ``tenant``, ``requester``,
    ``attempts``, ``retry_of`` and ``retried_as``; ``raw`` is the resource as received."""

    id: str
    type: str
    state: str
    attempt: int
    params: dict[str, Any]
    created_at: datetime | None
    updated_at: datetime | None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    retry_at: datetime | None = None
    run_at: datetime | None = None
    start_by: datetime | None = None
    priority: int = 3
    progress: Progress | None = None
    error: JobError | None = None
    result: Result | None = None
    links: dict[str, str] = field(default_factory=dict)
    tenant: str | None = None
    requester: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    retry_of: str | None = None
    retried_as: str | None = None
    replayed: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @classmethod
    def from_json(cls, d: dict[str, Any], replayed: bool = False) -> Job:
        prog, err, res = d.get("progress"), d.get("error"), d.get("result")
        params = d.get("params")
        return cls(
            id=str(d["id"]),
            type=str(d.get("type") or ""),
            state=str(d["state"]),
            attempt=_int(d.get("attempt")),
            params=params if isinstance(params, dict) else {},
            created_at=_time(d.get("created_at")),
            updated_at=_time(d.get("updated_at")),
            started_at=_time(d.get("started_at")),
            finished_at=_time(d.get("finished_at")),
            retry_at=_time(d.get("retry_at")),
            run_at=_time(d.get("run_at")),
            start_by=_time(d.get("start_by")),
            priority=_int(d.get("priority")) or 3,
            progress=Progress.from_json(prog) if isinstance(prog, dict) else None,
            error=JobError.from_json(err) if isinstance(err, dict) else None,
            result=Result.from_json(res) if isinstance(res, dict) else None,
            links={str(k): str(v) for k, v in (d.get("links") or {}).items()},
            tenant=d.get("tenant"),
            requester=d.get("requester"),
            attempts=[Attempt.from_json(a) for a in d.get("attempts") or [] if isinstance(a, dict)],
            retry_of=d.get("retry_of") or None,
            retried_as=d.get("retried_as") or None,
            replayed=replayed,
            raw=d,
        )


@dataclass(frozen=True)
class Page:
    """One page of a listing, newest first; pass ``next_cursor`` as ``cursor`` while it is set."""

    jobs: list[Job]
    next_cursor: str | None


@dataclass(frozen=True)
class BatchCounts:
    queued: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    canceled: int = 0
    scheduled: int = 0


@dataclass(frozen=True)
class Batch:
    """A batch: ``jobs`` maps each item, in order, to its job id and state (a page of them on reads)."""

    id: str
    done: bool
    total: int
    counts: BatchCounts
    progress: Progress | None
    jobs: list[tuple[str, str]]
    created_at: datetime | None = None
    next_cursor: str | None = None
    replayed: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any], replayed: bool = False) -> Batch:
        c = d.get("counts") or {}
        prog = d.get("progress")
        return cls(
            id=str(d["id"]),
            done=bool(d.get("done")),
            total=_int(d.get("total")),
            counts=BatchCounts(**{k: _int(c.get(k)) for k in BatchCounts.__dataclass_fields__}),
            progress=Progress.from_json(prog) if isinstance(prog, dict) else None,
            jobs=[(str(j["id"]), str(j.get("state") or "")) for j in d.get("jobs") or [] if isinstance(j, dict)],
            created_at=_time(d.get("created_at")),
            next_cursor=d.get("next_cursor") or None,
            replayed=replayed,
            raw=d,
        )
