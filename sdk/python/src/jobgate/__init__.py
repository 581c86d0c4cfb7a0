"""jobgate for Python: a client for the HTTP API and workers for the worker protocol v1.

- :class:`Client` / :class:`AsyncClient`: submit (with journaled idempotency keys), get, wait, download,
  cancel, batches and the admin basics; problems raise typed exceptions (:class:`ProblemError` and its
  subclasses).
- :class:`Worker`: ``@worker.job_type("name", ...)`` on ``def`` or ``async def`` handlers taking a
  :class:`WorkerJob`; ``worker.run()``.

- ``jobgate.endpoint``: handlers of endpoint types (jobgate calls them over HTTP): :func:`endpoint.verify`,
  the answers, and adapters for Flask, FastAPI and Django.
"""

from ._async_client import AsyncAdmin, AsyncClient
from ._attempt import Aborted, Failure, Permanent, WorkerJob
from ._client import Admin, Client
from ._errors import (
    BadRequestError,
    ConflictError,
    DigestMismatchError,
    FieldError,
    ForbiddenError,
    GoneError,
    JobgateError,
    NotConfirmedError,
    NotFoundError,
    PayloadTooLargeError,
    ProblemError,
    RateLimitedError,
    StorageFullError,
    UnauthorizedError,
    UnavailableError,
    UnexpectedResponseError,
    UnsupportedMediaTypeError,
    ValidationError,
    WaitTimeoutError,
)
from ._journal import Journal
from ._models import Attempt, Batch, BatchCounts, Job, JobError, Page, Progress, Result
from ._output import Output, ResultTooLargeError
from ._retry import RetryPolicy
from ._schema import SchemaError, param, schema_of
from ._wire import WireError, credential_id
from ._worker import Worker

__version__ = "0.1.0"

__all__ = [
    "Aborted",
    "Admin",
    "AsyncAdmin",
    "AsyncClient",
    "Attempt",
    "BadRequestError",
    "Batch",
    "BatchCounts",
    "Client",
    "ConflictError",
    "DigestMismatchError",
    "Failure",
    "FieldError",
    "ForbiddenError",
    "GoneError",
    "Job",
    "JobError",
    "JobgateError",
    "Journal",
    "NotConfirmedError",
    "NotFoundError",
    "Output",
    "Page",
    "PayloadTooLargeError",
    "Permanent",
    "ProblemError",
    "Progress",
    "RateLimitedError",
    "Result",
    "ResultTooLargeError",
    "RetryPolicy",
    "SchemaError",
    "StorageFullError",
    "UnauthorizedError",
    "UnavailableError",
    "UnexpectedResponseError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "WaitTimeoutError",
    "WireError",
    "Worker",
    "WorkerJob",
    "credential_id",
    "param",
    "schema_of",
]
