"""jobgate.endpoint against a real ``jobgate serve --dev`` (loopback endpoints allowed): endpoint types
declared over the admin API pointing at Flask, FastAPI and Django handlers on loopback, jobs submitted
over HTTP, and what the jobs' owners see."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from typing import Any

import django
import fastapi
import flask
import httpx
import pytest
from conftest import Deployment, until
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.urls import path
from endpoint_servers import asgi, wsgi

import jobgate
import jobgate.endpoint.django
import jobgate.endpoint.fastapi
import jobgate.endpoint.flask
from jobgate import endpoint


def declare(d: Deployment, name: str, url: str, **extra: Any) -> str:
    """Declares an endpoint type (PUT /v1/admin/types/{name}) and waits until requesters see it; its secret."""
    body = {
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {"name": {"type": "string", "maxLength": 64}},
        },
        "timeout_seconds": 20,
        "attempts": 3,
        "content_type": "text/plain",
        "endpoint": {"url": url, "concurrency": 2},
        **extra,
    }
    ops = d.jobgate("token", "--operator", "--subject", "ops")
    r = httpx.put(f"{d.url}/v1/admin/types/{name}", json=body, headers={"Authorization": f"Bearer {ops}"}, timeout=10)
    assert r.status_code == 201, r.text
    secret: str = r.json()["endpoint"]["secret"]
    user = d.token("py", "probe")
    until(
        lambda: httpx.get(f"{d.url}/v1/types/{name}", headers={"Authorization": f"Bearer {user}"}).status_code == 200,
        10,
        f"{name} visible",
    )
    return secret


def run_jobs(d: Deployment, type_: str, *names: str) -> list[tuple[jobgate.Job, bytes | None]]:
    """Submits a job a name over HTTP, all at once, and waits for each to end; the jobs and their results."""
    auth = {"Authorization": f"Bearer {d.token('py', 'ann')}"}
    out: list[tuple[jobgate.Job, bytes | None]] = []
    with jobgate.Client(d.url, auth["Authorization"][7:], journal=False) as c:
        jobs = [c.submit(type_, {"name": n}) for n in names]
        for submitted in jobs:
            job = c.wait(submitted.id, timeout=60)
            if job.state != "succeeded" or job.result is None:
                out.append((job, None))
                continue
            r = httpx.get(f"{d.url}/v1/jobs/{job.id}/result", headers=auth, follow_redirects=True)
            assert r.status_code == 200, r.text
            out.append((job, r.content))
    return out


class Seen:
    """The attempts a handler was given, for the assertions."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attempts: list[endpoint.Attempt] = []

    def add(self, a: endpoint.Attempt) -> None:
        with self.lock:
            self.attempts.append(a)


def greet(seen: Seen) -> endpoint.Handler:
    def greeting(a: endpoint.Attempt) -> endpoint.Answer | bytes | str | None:
        seen.add(a)
        name = a.params["name"]
        if name == "nobody":
            return endpoint.reject(f"no greeting for {name}")
        if name == "later" and a.attempt == 1:
            return endpoint.retry_later(0)
        if name == "silent":
            return None
        return f"Hello, {name}! (attempt {a.attempt})"

    return greeting


def check_greetings(d: Deployment, type_: str, seen: Seen, *, retry: bool) -> None:
    """What the owners of a type's jobs see. The retry waits the type's backoff (about 25 s), so it runs
    through one adapter only: the others' 503 answers are checked by direct_retry."""
    names = ["Ada", "silent", "nobody"] + (["later"] if retry else [])
    (ok, out), (silent, silent_out), (refused, _), *rest = run_jobs(d, type_, *names)
    assert ok.state == "succeeded", ok.error
    assert out == b"Hello, Ada! (attempt 1)"
    a = next(a for a in seen.attempts if a.id == ok.id)
    assert (a.type, a.tenant, a.requester, a.attempt, a.attempts) == (type_, "py", "ann", 1, 3)
    assert a.webhook_id == f"{ok.id}.a1"
    assert a.created_at.tzinfo is not None and a.deadline > a.created_at

    assert silent.state == "succeeded" and silent.result is None and silent_out is None

    # A 4xx refusal: failed at once, the handler's words shown to the owner, no second attempt.
    assert refused.state == "failed"
    assert refused.error is not None and refused.error.category == "endpoint_rejected"
    assert refused.error.message == "no greeting for nobody"
    assert [a.attempt for a in seen.attempts if a.id == refused.id] == [1]

    if not retry:
        return
    # A 5xx (503 with Retry-After): retried, and the second attempt's answer stands.
    ((later, later_out),) = rest
    assert later.state == "succeeded", later.error
    assert later_out == b"Hello, later! (attempt 2)"
    assert [a.attempt for a in seen.attempts if a.id == later.id] == [1, 2]


def test_an_accepted_attempt_reports_through_its_callback(dev: Deployment) -> None:
    seen = Seen()
    lost: list[endpoint.AttemptLostError] = []
    workers: list[threading.Thread] = []

    def report(a: endpoint.Attempt) -> None:
        assert a.callback is not None
        with endpoint.Callback(a.callback) as cb:
            cb.beat(1, 2, "steps")
            if a.params["name"] == "nobody":
                cb.fail("no such greeting", user_message="no greeting for nobody", retryable=False)
            else:
                cb.result(f"Hello later, {a.params['name']}!")
                cb.done()
            try:
                cb.beat()  # the attempt ended: the URL is worth nothing now
            except endpoint.AttemptLostError as e:
                lost.append(e)

    def slow(a: endpoint.Attempt) -> endpoint.Answer:
        seen.add(a)
        t = threading.Thread(target=report, args=(a,), daemon=True)
        workers.append(t)
        t.start()
        return endpoint.accepted()

    apps: list[flask.Flask] = []
    with wsgi(lambda: apps[0]) as base:
        secret = declare(dev, "py_async_greeting", base + "/jobs/greeting")
        app = flask.Flask("async_greeting")
        app.add_url_rule("/jobs/greeting", view_func=jobgate.endpoint.flask.handler(secret, slow), methods=["POST"])
        apps.append(app)
        (ok, out), (refused, _) = run_jobs(dev, "py_async_greeting", "Ada", "nobody")
        for t in workers:
            t.join(10)
    assert ok.state == "succeeded", ok.error
    assert out == b"Hello later, Ada!"
    assert ok.progress is not None and (ok.progress.total, ok.progress.unit) == (2, "steps")  # done: 2 once succeeded
    assert refused.state == "failed" and refused.error is not None
    assert refused.error.message == "no greeting for nobody"
    assert [a.attempt for a in seen.attempts if a.id == refused.id] == [1]
    assert len(lost) == 2 and not any(e.canceled for e in lost) and {e.status for e in lost} == {409}
    with pytest.raises(ValueError):
        endpoint.Callback("")


def direct_retry(url: str, secret: str) -> None:
    """A signed attempt asking for "later" straight to the handler: 503 with Retry-After."""
    body = json.dumps(
        {
            "job": {
                "id": "job_direct",
                "type": "t",
                "tenant": "py",
                "requester": "ann",
                "attempt": 1,
                "attempts": 3,
                "created_at": "2026-12-04T17:09:58Z",
                "params": {"name": "later"},
                "deadline": "2026-12-04T17:12:00Z",
            }
        }
    ).encode()
    r = httpx.post(url, content=body, headers=sign(secret, "job_direct.a1", int(time.time()), body))
    assert r.status_code == 503 and r.headers["retry-after"] == "0", r.text


def test_flask_handler_runs_the_jobs(dev: Deployment) -> None:
    seen = Seen()
    apps: list[flask.Flask] = []
    with wsgi(lambda: apps[0]) as base:
        secret = declare(dev, "py_flask_greeting", base + "/jobs/greeting")
        app = flask.Flask("greeting")
        app.add_url_rule(
            "/jobs/greeting", view_func=jobgate.endpoint.flask.handler(secret, greet(seen)), methods=["POST"]
        )
        apps.append(app)
        check_greetings(dev, "py_flask_greeting", seen, retry=True)
        # Unsigned, and signed with another secret: refused before any work.
        r = httpx.post(base + "/jobs/greeting", content=b'{"job":{}}')
        assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"
        body = b'{"job":{"id":"job_x"}}'
        r = httpx.post(base + "/jobs/greeting", content=body, headers=sign(OTHER, "job_x.a1", int(time.time()), body))
        assert r.status_code == 401
        assert all(a.id != "job_x" for a in seen.attempts)


def test_fastapi_handler_runs_the_jobs(dev: Deployment) -> None:
    app = fastapi.FastAPI()
    seen = Seen()
    sync_greet = greet(seen)

    async def greeting(a: endpoint.Attempt) -> endpoint.Answer | bytes | str | None:
        return sync_greet(a)

    secret_box: list[str] = []

    async def route(request: fastapi.Request) -> fastapi.Response:
        return await jobgate.endpoint.fastapi.handler(secret_box[0], greeting)(request)

    app.add_api_route("/jobs/greeting", route, methods=["POST"])
    with asgi(app) as base:
        secret_box.append(declare(dev, "py_fastapi_greeting", base + "/jobs/greeting"))
        check_greetings(dev, "py_fastapi_greeting", seen, retry=False)
        direct_retry(base + "/jobs/greeting", secret_box[0])
        assert httpx.post(base + "/jobs/greeting", content=b"{}").status_code == 401


def test_django_handler_runs_the_jobs(dev: Deployment) -> None:
    if not settings.configured:
        settings.configure(DEBUG=False, ALLOWED_HOSTS=["127.0.0.1"], ROOT_URLCONF=__name__, SECRET_KEY="test")
        django.setup()
    seen = Seen()
    app = WSGIHandler()
    with wsgi(lambda: app) as base:
        secret = declare(dev, "py_django_greeting", base + "/jobs/greeting")
        DJANGO_VIEWS["greeting"] = jobgate.endpoint.django.handler(secret, greet(seen))
        check_greetings(dev, "py_django_greeting", seen, retry=False)
        direct_retry(base + "/jobs/greeting", secret)
        assert httpx.post(base + "/jobs/greeting", content=b"{}").status_code == 401
        assert httpx.get(base + "/jobs/greeting").status_code == 405


# Django's URLconf (ROOT_URLCONF is this module): the view is set once the type's secret is known.
DJANGO_VIEWS: dict[str, Any] = {}


def _django_greeting(request: Any) -> Any:
    return DJANGO_VIEWS["greeting"](request)


urlpatterns = [path("jobs/greeting", _django_greeting)]


# The request docs/endpoints.md shows, signed by jobgate's Go signer.
DOC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER = "whsec_" + base64.b64encode(b"another team's secret, 32 bytes!").decode()
DOC_BODY = (
    b'{"job":{"id":"job_4kq2m7w3xv5bhyrj6tq2c3n4pe","type":"thumbnail","tenant":"acme","requester":"ann",'
    b'"attempt":1,"attempts":3,"created_at":"2026-12-04T17:09:58Z","params":{"url":"https://cdn.example.com/a.png",'
    b'"width":256},"deadline":"2026-12-04T17:12:00Z"}}'
)
DOC_HEADERS = {
    "webhook-id": "job_4kq2m7w3xv5bhyrj6tq2c3n4pe.a1",
    "webhook-timestamp": "1796404200",
    "webhook-signature": "v1,N8jSYqboGQtUJQPNirv63OdwgsczCQYovZJ7PyCTaKg=",
}


def sign(secret: str, msg_id: str, ts: int, body: bytes) -> dict[str, str]:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": "v1," + base64.b64encode(mac).decode(),
    }


def test_verify_accepts_what_jobgate_signs_and_refuses_forgeries() -> None:
    now = 1796404200.0
    a = endpoint.verify(DOC_SECRET, DOC_HEADERS, DOC_BODY, now=now + 299)
    assert a.id == "job_4kq2m7w3xv5bhyrj6tq2c3n4pe" and a.webhook_id == "job_4kq2m7w3xv5bhyrj6tq2c3n4pe.a1"
    assert a.params == {"url": "https://cdn.example.com/a.png", "width": 256}
    assert (a.attempt, a.attempts, a.deadline.isoformat()) == (1, 3, "2026-12-04T17:12:00+00:00")
    # Header names in any case; a rotation's two signatures, and two secrets given.
    upper = {k.upper(): v for k, v in DOC_HEADERS.items()}
    assert endpoint.verify(DOC_SECRET, upper, DOC_BODY, now=now).id == a.id
    two = {**DOC_HEADERS, "webhook-signature": "v1,AAAA v1a,xyz " + DOC_HEADERS["webhook-signature"]}
    assert endpoint.verify([OTHER, DOC_SECRET], two, DOC_BODY, now=now).id == a.id
    assert endpoint.verify(f"{OTHER} {DOC_SECRET}", DOC_HEADERS, DOC_BODY, now=now).id == a.id

    def refused(reason: str, secret: str, headers: dict[str, str], body: bytes, at: float = now) -> None:
        with pytest.raises(endpoint.VerificationError) as e:
            endpoint.verify(secret, headers, body, now=at)
        assert e.value.reason == reason

    refused("signature", OTHER, DOC_HEADERS, DOC_BODY)  # forged: another key
    refused("signature", DOC_SECRET, DOC_HEADERS, DOC_BODY.replace(b"ann", b"bob"))  # the body changed
    refused("signature", DOC_SECRET, {**DOC_HEADERS, "webhook-id": "job_other.a1"}, DOC_BODY)
    refused(
        "signature",
        DOC_SECRET,
        {**DOC_HEADERS, "webhook-signature": "v2," + DOC_HEADERS["webhook-signature"][3:]},
        DOC_BODY,
    )
    refused("signature", DOC_SECRET, {k: v for k, v in DOC_HEADERS.items() if k != "webhook-signature"}, DOC_BODY)
    refused("timestamp", DOC_SECRET, DOC_HEADERS, DOC_BODY, now + 301)  # a replay, later
    refused("timestamp", DOC_SECRET, DOC_HEADERS, DOC_BODY, now - 301)
    refused("timestamp", DOC_SECRET, {**DOC_HEADERS, "webhook-timestamp": "soon"}, DOC_BODY)
    # Signed, yet not an attempt: a typed refusal, never a crash.
    for bad in (
        b"not json",
        b"[1]",
        b'{"job":{"id":"x"}}',
        b'{"job":{"id":"x","type":"t","tenant":"a","requester":"r","attempt":true,"attempts":3}}',
    ):
        refused("body", DOC_SECRET, sign(DOC_SECRET, "x.a1", int(now), bad), bad)
    with pytest.raises(ValueError):
        endpoint.Verifier("whsec_not base64!")


def test_answers_are_what_jobgate_reads() -> None:
    assert endpoint.result("hé") == endpoint.Answer(200, "hé".encode())
    assert endpoint.no_result().status == 204
    r = endpoint.reject("the image is \x00 too small")
    assert r.status == 422 and r.headers["Content-Type"] == "application/problem+json"
    assert json.loads(r.body)["detail"] == "the image is \x00 too small"
    later = endpoint.retry_later(2.5)
    assert later.status == 503 and later.headers["Retry-After"] == "3"
    with pytest.raises(ValueError):
        endpoint.reject("busy", status=429)  # jobgate retries a 429: not a refusal
