"""Handlers of endpoint types served on loopback in threads of the test process: WSGI (Flask,
Django) with wsgiref, ASGI (FastAPI) with uvicorn."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import uvicorn


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingWSGIServer(WSGIServer):
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        # One thread a request: jobgate may call while another request is still answered.
        t = threading.Thread(target=self._serve_one, args=(request, client_address), daemon=True)
        t.start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        finally:
            self.shutdown_request(request)


@contextmanager
def wsgi(app: Callable[[], Callable[..., Any]]) -> Iterator[str]:
    """Serves ``app()`` (read at each request: the app is made once the type's secret is known) on a
    free loopback port; yields its base URL."""

    def current(environ: Any, start_response: Any) -> Any:
        return app()(environ, start_response)

    srv = make_server("127.0.0.1", 0, current, server_class=_ThreadingWSGIServer, handler_class=_Quiet)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}"
    finally:
        srv.shutdown()
        srv.server_close()


@contextmanager
def asgi(app: Any) -> Iterator[str]:
    """Serves app with uvicorn on a free loopback port; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    t = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise AssertionError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        t.join(10)
        sock.close()
