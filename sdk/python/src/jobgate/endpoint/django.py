"""A Django view of an endpoint type (``pip install jobgate[django]``).

::

    urlpatterns = [path("jobs/greeting", handler(settings.GREETING_SECRET, greet))]

The view is exempt from CSRF (the signature is the request's proof) and takes POST only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from . import Handler, Verifier, handle, secrets_of

__all__ = ["handler"]


def handler(secret: str | Sequence[str] | Verifier, fn: Handler) -> Callable[[HttpRequest], HttpResponse]:
    """A view answering jobgate's requests signed with ``secret`` by ``fn``'s answer."""
    verifier = secrets_of(secret)

    def view(request: HttpRequest) -> HttpResponse:
        a = handle(verifier, fn, request.headers, request.body)
        resp = HttpResponse(a.body, status=a.status, content_type=a.headers.get("Content-Type"))
        for k, v in a.headers.items():
            resp[k] = v
        return resp

    view.__name__ = f"jobgate_endpoint_{getattr(fn, '__name__', 'handler')}"
    wrapped: Any = csrf_exempt(require_POST(view))
    return wrapped  # type: ignore[no-any-return]
