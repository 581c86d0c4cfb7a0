"""A Flask view of an endpoint type (``pip install jobgate[flask]``).

::

    app.add_url_rule("/jobs/greeting", view_func=handler(os.environ["SECRET"], greet), methods=["POST"])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flask

from . import Handler, Verifier, handle, secrets_of

__all__ = ["handler"]


def handler(secret: str | Sequence[str] | Verifier, fn: Handler) -> Callable[[], flask.Response]:
    """A view answering jobgate's requests signed with ``secret`` by ``fn``'s answer."""
    verifier = secrets_of(secret)

    def view() -> flask.Response:
        req = flask.request
        a = handle(verifier, fn, {k.lower(): v for k, v in req.headers.items()}, req.get_data(cache=False))
        return flask.Response(a.body, status=a.status, headers=a.headers)

    # Flask names a view's endpoint after its function: each handler gets its own.
    view.__name__ = f"jobgate_endpoint_{getattr(fn, '__name__', 'handler')}"
    return view
