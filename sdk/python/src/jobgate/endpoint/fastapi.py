"""A FastAPI (Starlette) route of an endpoint type (``pip install jobgate[fastapi]``).

::

    app.add_api_route("/jobs/greeting", handler(os.environ["SECRET"], greet), methods=["POST"])

``fn`` may be ``def`` (run in the thread pool) or ``async def``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from . import Answer, Attempt, VerificationError, Verifier, answer_of, refusal, secrets_of

__all__ = ["handler"]

AsyncHandler = Callable[[Attempt], Awaitable["Answer | bytes | str | None"]]


def handler(
    secret: str | Sequence[str] | Verifier,
    fn: Callable[[Attempt], Answer | bytes | str | None] | AsyncHandler,
) -> Callable[[Request], Awaitable[Response]]:
    """A route answering jobgate's requests signed with ``secret`` by ``fn``'s answer."""
    verifier = secrets_of(secret)

    async def route(request: Request) -> Response:
        body = await request.body()
        try:
            a = verifier.verify(request.headers, body)
        except VerificationError as e:
            return _response(refusal(e))
        if inspect.iscoroutinefunction(fn):
            out = await fn(a)
        else:
            out = await run_in_threadpool(fn, a)
        return _response(answer_of(out))

    route.__name__ = f"jobgate_endpoint_{getattr(fn, '__name__', 'handler')}"
    return route


def _response(a: Answer) -> Response:
    return Response(a.body, status_code=a.status, headers=a.headers)
