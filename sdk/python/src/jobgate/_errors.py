"""What the client raises: RFC 9457 problems as typed exceptions, and its own failures."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx

from ._retry import retry_after

__all__ = [
    "BadRequestError",
    "ConflictError",
    "DigestMismatchError",
    "FieldError",
    "ForbiddenError",
    "GoneError",
    "JobgateError",
    "NotConfirmedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ProblemError",
    "RateLimitedError",
    "StorageFullError",
    "UnauthorizedError",
    "UnavailableError",
    "UnexpectedResponseError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "WaitTimeoutError",
]


class JobgateError(Exception):
    """The base of every error this package raises."""


@dataclass(frozen=True)
class FieldError:
    """One invalid field of a 422: ``field`` is a JSON pointer into the request (``/params/pages``)."""

    field: str
    message: str
    rule: str | None = None


class ProblemError(JobgateError):
    """An RFC 9457 problem the server answered with (or an error status without one).

    ``slug`` is the last segment of its ``type`` (``not-found``); ``retry_after`` the server's
    ``Retry-After`` in seconds, when it sent one.
    """

    def __init__(
        self,
        status: int,
        type: str = "",
        title: str = "",
        detail: str = "",
        retry_after: float | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.retry_after = retry_after
        self.body: dict[str, Any] = body or {}
        super().__init__(self._describe())

    @property
    def slug(self) -> str:
        return self.type.rsplit("/", 1)[-1] if self.type else ""

    def _describe(self) -> str:
        msg = self.detail or self.title or f"HTTP {self.status}"
        return f"{msg} ({self.status} {self.slug})" if self.slug else f"{msg} (HTTP {self.status})"


class BadRequestError(ProblemError):
    """400: malformed-request, idempotency-key-missing, idempotency-key-invalid, bad-request."""


class UnauthorizedError(ProblemError):
    """401 unauthorized: a missing, invalid or expired token."""


class ForbiddenError(ProblemError):
    """403: forbidden (the role does not reach the path), link-invalid."""


class NotFoundError(ProblemError):
    """404 not-found: no such job is visible to this token (another requester's looks the same)."""


class ConflictError(ProblemError):
    """409: idempotency-key-reused (``job_id`` names the key's job), job-terminal, result-not-ready,
    job-failed, job-canceled, job-not-retryable, type-in-use."""

    def __init__(self, *args: Any, job_id: str | None = None, **kwargs: Any) -> None:
        self.job_id = job_id
        super().__init__(*args, **kwargs)


class GoneError(ProblemError):
    """410: link-expired (ask for a fresh link), result-expired (the file is no longer kept)."""


class PayloadTooLargeError(ProblemError):
    """413 payload-too-large."""


class UnsupportedMediaTypeError(ProblemError):
    """415 unsupported-media-type."""


class ValidationError(ProblemError):
    """422 validation: ``errors`` lists each invalid field; the key was not consumed."""

    def __init__(self, *args: Any, errors: list[FieldError] | None = None, truncated: bool = False, **kwargs: Any):
        self.errors: list[FieldError] = errors or []
        self.truncated = truncated
        super().__init__(*args, **kwargs)

    def _describe(self) -> str:
        fields = "; ".join(f"{e.field}: {e.message}" for e in self.errors[:5])
        return f"{super()._describe()}: {fields}" if fields else super()._describe()


class RateLimitedError(ProblemError):
    """429 rate-limited; ``retry_after`` says when to ask again."""


class UnavailableError(ProblemError):
    """503 unavailable (and other 5xx): nothing was admitted, the same request with the same key is safe."""


class StorageFullError(UnavailableError):
    """507 storage-full: nothing was admitted; retry after ``retry_after`` with the same key."""


class UnexpectedResponseError(JobgateError):
    """A response the contract does not describe."""


class DigestMismatchError(JobgateError):
    """A downloaded result does not match the size or SHA-256 its job announced."""


class WaitTimeoutError(JobgateError, TimeoutError):
    """``wait`` reached its timeout before the job ended; ``job`` is the last version seen."""

    def __init__(self, message: str, job: Any = None) -> None:
        self.job = job
        super().__init__(message)


class NotConfirmedError(JobgateError):
    """A submission without a definitive answer (the server unreachable, or failing until the retry
    budget ran out). With ``journaled`` its key stays in the journal: the same submit again, from this
    process or the next, sends the same key and gets the same job. ``key`` is that key (do not log it).
    """

    def __init__(self, message: str, key: str, journaled: bool, cause: BaseException | None = None) -> None:
        self.key = key
        self.journaled = journaled
        self.cause = cause
        super().__init__(message)


_by_status: dict[int, type[ProblemError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    422: ValidationError,
    429: RateLimitedError,
    507: StorageFullError,
}

_job_id = re.compile(r"\bjob_[A-Za-z0-9_-]{1,60}\b")


def problem_from(resp: httpx.Response) -> ProblemError:
    """The typed exception of an error response (its body must have been read)."""
    ra = retry_after(resp.headers.get("Retry-After"))
    doc: dict[str, Any] = {}
    ctype = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if ctype in ("application/problem+json", "application/json"):
        try:
            parsed = json.loads(resp.content[: 64 << 10])
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            doc = parsed
    detail = str(doc.get("detail") or "")
    ptype = str(doc.get("type") or "")
    if not ptype and not detail:
        # Not a problem document (a proxy's error page): one line of it.
        detail = resp.text.strip().split("\n", 1)[0][:200]
    cls = _by_status.get(resp.status_code)
    if cls is None:
        cls = UnavailableError if resp.status_code >= 500 else ProblemError
    common: dict[str, Any] = {
        "type": ptype,
        "title": str(doc.get("title") or ""),
        "detail": detail,
        "retry_after": ra,
        "body": doc,
    }
    if cls is ValidationError:
        errs = [
            FieldError(str(e.get("field", "")), str(e.get("message", "")), e.get("rule"))
            for e in doc.get("errors") or []
            if isinstance(e, dict)
        ]
        return ValidationError(resp.status_code, errors=errs, truncated=bool(doc.get("errors_truncated")), **common)
    if cls is ConflictError:
        jid = doc.get("job_id")
        if not jid and ptype.endswith("/idempotency-key-reused"):
            m = _job_id.search(detail)
            jid = m.group(0) if m else None
        return ConflictError(resp.status_code, job_id=str(jid) if jid else None, **common)
    return cls(resp.status_code, **common)
