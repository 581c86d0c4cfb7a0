"""The client against a real ``jobgate serve``: what a user of the HTTP API sees."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import Deployment, Proc, child_env, free_addr, until

import jobgate
from jobgate._retry import retry_after, retryable_status


def client(d: Deployment, tmp_path: Path, subject: str, **kw: Any) -> jobgate.Client:
    return jobgate.Client(d.url, d.token("py", subject), journal=tmp_path / "journal.sqlite", **kw)


def test_permit_report_submitted_waited_for_and_downloaded(deployment: Deployment, tmp_path: Path) -> None:
    with client(deployment, tmp_path, "report-reader") as c:
        job = c.submit("permit_report", {"case_id": 47, "revision": 29, "pages": 5})
        assert job.state in ("queued", "running", "succeeded")
        assert job.type == "permit_report"
        assert not job.replayed
        seen: list[str] = []
        done = c.wait(job.id, timeout=60, on_update=lambda j: seen.append(j.state))
        assert done.state == "succeeded", done.error
        assert seen[-1] == "succeeded"
        assert done.result is not None and done.result.content_type == "application/pdf"
        assert done.progress == jobgate.Progress(5, 5, "pages")
        pdf = tmp_path / "report.pdf"
        got = c.download(job.id, pdf)
        data = pdf.read_bytes()
        assert data.startswith(b"%PDF-")
        assert got.size == len(data) == done.result.size
        assert got.sha256 == done.result.sha256
        assert not list(tmp_path.glob(".jobgate-*")), "no temporary file left"


def test_same_key_replays_the_same_job(deployment: Deployment, tmp_path: Path) -> None:
    params = {"case_id": 3, "revision": 1, "pages": 2}
    with client(deployment, tmp_path, "replayer") as c:
        first = c.submit("permit_report", params, key="order-3")
        again = c.submit("permit_report", {"pages": 2.0, "revision": 1, "case_id": 3}, key="order-3")
        assert again.id == first.id
        assert again.replayed and not first.replayed
    # Another process without a journal: the server itself answers 200 with the same job.
    with jobgate.Client(deployment.url, deployment.token("py", "replayer"), journal=False) as c2:
        third = c2.submit("permit_report", params, key="order-3")
        assert third.id == first.id and third.replayed


def test_same_key_other_payload_is_a_conflict(deployment: Deployment, tmp_path: Path) -> None:
    with jobgate.Client(deployment.url, deployment.token("py", "conflicted"), journal=False) as c:
        first = c.submit("permit_report", {"case_id": 4, "revision": 1}, key="order-4")
        with pytest.raises(jobgate.ConflictError) as e:
            c.submit("permit_report", {"case_id": 5, "revision": 1}, key="order-4")
        assert e.value.status == 409
        assert e.value.slug == "idempotency-key-reused"
        assert e.value.job_id == first.id
    # With a journal the refusal comes before anything is sent, with the same typed error.
    with client(deployment, tmp_path, "conflicted") as c:
        c.submit("permit_report", {"case_id": 6, "revision": 1}, key="order-6")
        with pytest.raises(jobgate.ConflictError):
            c.submit("permit_report", {"case_id": 7, "revision": 1}, key="order-6")


def test_invalid_params_are_a_validation_error_and_keep_the_key_free(deployment: Deployment, tmp_path: Path) -> None:
    with client(deployment, tmp_path, "validator") as c:
        with pytest.raises(jobgate.ValidationError) as e:
            c.submit("permit_report", {"case_id": 1, "revision": 1, "pages": 0, "colour": "red"}, key="order-9")
        assert e.value.status == 422 and e.value.slug == "validation"
        fields = {f.field for f in e.value.errors}
        assert "/params/pages" in fields, e.value.errors
        assert any(f.field.startswith("/params") and f.message for f in e.value.errors)
        # The key was not consumed, and the journal forgot it.
        ok = c.submit("permit_report", {"case_id": 1, "revision": 1}, key="order-9")
        assert not ok.replayed
        with pytest.raises(jobgate.ValidationError):
            c.submit("no_such_type", {})


def test_problems_are_typed(deployment: Deployment, tmp_path: Path) -> None:
    with client(deployment, tmp_path, "typed") as c:
        with pytest.raises(jobgate.NotFoundError) as nf:
            c.get("job_doesnotexist")
        assert nf.value.status == 404 and nf.value.slug == "not-found"
        job = c.submit("permit_report", {"case_id": 8, "revision": 1, "pages": 1})
        c.wait(job.id, timeout=60)
        with pytest.raises(jobgate.ConflictError) as term:
            c.cancel(job.id)
        assert term.value.slug == "job-terminal"
    with jobgate.Client(deployment.url, "not-a-token", journal=False) as bad:
        with pytest.raises(jobgate.UnauthorizedError):
            bad.get(job.id)
        # A 401 on a submit is no definitive answer: the key stays for a run with a fresh token.
        with pytest.raises(jobgate.NotConfirmedError) as nc:
            bad.submit("permit_report", {"case_id": 8, "revision": 1})
        assert isinstance(nc.value.cause, jobgate.UnauthorizedError)


def test_unreachable_server_keeps_the_key_for_the_next_run(
    deployment: Deployment, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = tmp_path / "journal.sqlite"
    token = deployment.token("py", "offline")
    params = {"case_id": 11, "revision": 2, "pages": 1}
    fast = jobgate.RetryPolicy(base_delay=0.01, max_delay=0.05, max_elapsed=0.3, attempt_timeout=1)
    addr = free_addr()
    with (
        jobgate.Client("http://" + addr, token, journal=journal, retry=fast) as down,
        pytest.raises(jobgate.NotConfirmedError) as e,
    ):
        down.submit("permit_report", params)
    assert e.value.journaled
    key = e.value.key
    # The same gateway address reachable again (a forwarder to the gateway on it): the rerun sends
    # the journaled key.
    fwd = forward_late(addr, deployment.url.removeprefix("http://"), 0)
    with jobgate.Client("http://" + addr, token, journal=journal) as up:
        job = up.submit("permit_report", params)
    fwd.join(10)
    [entry] = jobgate.Journal(journal).entries()
    assert entry.key == key and entry.job_id == job.id
    # The retries were logged, without the key or the token.
    assert "request failed, retrying" in caplog.text
    assert all(key not in str(r.__dict__) and token not in str(r.__dict__) for r in caplog.records)


@pytest.mark.parametrize("point", ["journaled", "answered"])
def test_killed_client_resubmits_its_journaled_key(
    deployment: Deployment, tmp_path: Path, procs: Any, point: str
) -> None:
    """A client process killed (SIGKILL) after its key was journaled — before the request, or after the
    server made the job but before the answer was recorded — run again makes no second job."""
    subject = f"killed-{point}"
    env = child_env(
        JOBGATE_URL=deployment.url,
        JOBGATE_TOKEN=deployment.token("py", subject),
        JOURNAL=str(tmp_path / "journal.sqlite"),
        CASE="12",
    )
    marker = tmp_path / "hook"
    first: Proc = procs("submitter-1", ["submitter.py"], {**env, "JOBGATE_SDK_TEST_HOOK": f"{point}={marker}"})
    until(marker.exists, 20, "the submission's hook")
    first.signal(signal.SIGKILL)
    assert first.exit_code(10) == -signal.SIGKILL
    [pending] = jobgate.Journal(tmp_path / "journal.sqlite").entries()
    assert pending.state == "pending" and pending.job_id is None

    second: Proc = procs("submitter-2", ["submitter.py"], env)
    ev = second.wait_event(lambda e: e.get("event") == "submitted", 30, "submission")
    assert second.exit_code(10) == 0
    # "answered": the server had made the job, the rerun's same key is a 200 replay of it.
    assert ev["replayed"] is (point == "answered")
    with jobgate.Client(deployment.url, env["JOBGATE_TOKEN"], journal=False) as c:
        jobs = [j for j in c.list(limit=100).jobs if j.type == "permit_report"]
    assert [j.id for j in jobs] == [ev["id"]], "exactly one job"
    [entry] = jobgate.Journal(tmp_path / "journal.sqlite").entries()
    assert entry.key == pending.key and entry.job_id == ev["id"]


def test_journal_is_private_sqlite(tmp_path: Path) -> None:
    j = jobgate.Journal(tmp_path / "state" / "journal.sqlite")
    assert j.entries() == []
    assert (os.stat(j.path).st_mode & 0o777) == 0o600
    with sqlite3.connect(j.path) as db:
        assert db.execute("SELECT count(*) FROM entries").fetchone() == (0,)


def test_wait_times_out_with_the_last_version(deployment: Deployment, tmp_path: Path, idle_type: str) -> None:
    with client(deployment, tmp_path, "patient") as c:
        job = c.submit(idle_type, {"gate": "never"})
        with pytest.raises(jobgate.WaitTimeoutError) as e:
            c.wait(job.id, timeout=0.5)
        assert isinstance(e.value, TimeoutError)
        assert e.value.job is not None and e.value.job.id == job.id
        canceled = c.cancel(job.id)
        assert canceled.state == "canceled"
        with pytest.raises(jobgate.ConflictError) as nr:
            c.download(job.id, tmp_path / "none.pdf")
        assert nr.value.slug == "job-canceled"


def test_flow_fields_schedule_a_job(deployment: Deployment, tmp_path: Path) -> None:
    params = {"case_id": 5, "revision": 1, "pages": 1}
    start_by = datetime.now(UTC) + timedelta(hours=2)
    with client(deployment, tmp_path, "scheduler") as c:
        job = c.submit("permit_report", params, key="sched-1", delay=timedelta(hours=1), priority=2, start_by=start_by)
        assert job.state == "scheduled"
        assert job.run_at is not None and job.run_at > datetime.now(UTC) + timedelta(minutes=59)
        assert job.priority == 2
        assert job.start_by is not None and abs((job.start_by - start_by).total_seconds()) < 0.001
        # The same request later replays the job whose delay was resolved once.
        again = c.submit(
            "permit_report", params, key="sched-1", delay=timedelta(seconds=3600), priority=2, start_by=start_by
        )
        assert again.replayed and again.run_at == job.run_at
        with pytest.raises(jobgate.ConflictError):
            c.submit("permit_report", params, key="sched-1", delay=timedelta(hours=2))
        with pytest.raises(jobgate.ValidationError):
            c.submit("permit_report", params, key="sched-2", priority=9)
        assert c.cancel(job.id).state == "canceled"


def test_batch_is_one_request_and_replays(deployment: Deployment, tmp_path: Path) -> None:
    items = [("permit_report", {"case_id": n, "revision": 1, "pages": 1}) for n in (21, 22, 23)]
    with client(deployment, tmp_path, "batcher") as c:
        b = c.submit_batch(items, key="batch-1")
        assert b.id.startswith("bat_") and b.total == 3 and len(b.jobs) == 3
        again = c.submit_batch(items, key="batch-1")
        assert again.replayed and [j for j, _ in again.jobs] == [j for j, _ in b.jobs]
        for job_id, _ in b.jobs:
            assert c.wait(job_id, timeout=60).state == "succeeded"
        done = until(lambda: (x := c.get_batch(b.id)).done and x, 20, "batch done")
        assert done.counts.succeeded == 3
        with pytest.raises(jobgate.ValidationError) as e:
            c.submit_batch([("permit_report", {"case_id": 1, "revision": 1}), ("permit_report", {"case_id": 0})])
        assert any(f.field.startswith("/jobs/1/params") for f in e.value.errors), e.value.errors


def test_admin_lists_gets_cancels_and_retries(deployment: Deployment, tmp_path: Path, idle_type: str) -> None:
    with client(deployment, tmp_path, "admined") as c:
        job = c.submit(idle_type, {"gate": "never"})
    with jobgate.Client(deployment.url, deployment.token("py", "boss", "--admin"), journal=False) as a:
        page = a.admin.list_jobs(requester="admined", type=idle_type)
        assert job.id in [j.id for j in page.jobs]
        assert all(j.tenant == "py" and j.requester == "admined" for j in page.jobs)
        got = a.admin.get_job(job.id)
        assert got.tenant == "py" and got.requester == "admined"
        canceled = a.admin.cancel(job.id)
        assert canceled.state == "canceled"
        retried = a.admin.retry(job.id, key="retry-31")
        assert retried.id != job.id and retried.retry_of == job.id and not retried.replayed
        again = a.admin.retry(job.id, key="retry-31")
        assert again.id == retried.id and again.replayed
        assert a.admin.get_job(job.id).retried_as == retried.id
        a.admin.cancel(retried.id)
        with pytest.raises(jobgate.ForbiddenError):
            jobgate.Client(deployment.url, deployment.token("py", "nobody"), journal=False).admin.list_jobs()


@pytest.mark.anyio
async def test_async_client_submits_waits_and_downloads(deployment: Deployment, tmp_path: Path) -> None:
    token = deployment.token("py", "async-reader")
    async with jobgate.AsyncClient(deployment.url, token, journal=tmp_path / "journal.sqlite") as c:
        job = await c.submit("permit_report", {"case_id": 41, "revision": 1, "pages": 2}, key="async-41")
        again = await c.submit("permit_report", {"case_id": 41, "revision": 1, "pages": 2}, key="async-41")
        assert again.id == job.id and again.replayed
        done = await c.wait(job.id, timeout=60)
        assert done.state == "succeeded"
        got = await c.download(job.id, tmp_path / "r.pdf")
        assert (tmp_path / "r.pdf").read_bytes()[:5] == b"%PDF-" and got.size == done.result.size  # type: ignore[union-attr]
        with pytest.raises(jobgate.ValidationError):
            await c.submit("permit_report", {"case_id": 0, "revision": 1})
        with pytest.raises(jobgate.NotFoundError):
            await c.get("job_nope")
        page = await c.list(limit=10)
        assert job.id in [j.id for j in page.jobs]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_retry_policy_never_retries_before_retry_after() -> None:
    p = jobgate.RetryPolicy(base_delay=0.25, max_delay=15, rand=lambda: 0.999)
    assert p.backoff(0) < 0.25
    assert p.backoff(10) < 15
    assert p.backoff(0, 7.0) == 7.0  # the server's Retry-After wins over a shorter backoff
    zero = jobgate.RetryPolicy(rand=lambda: 0.0)
    assert zero.backoff(3, None) == 0.0 and zero.backoff(3, 2.0) == 2.0
    assert retry_after("3") == 3.0 and retry_after(None) is None and retry_after("soon") is None
    assert retry_after("Fri, 04 Dec 2026 10:00:10 GMT", now=1796378400.0) == 10.0
    assert all(retryable_status(s) for s in (408, 425, 429, 500, 502, 503, 504, 507))
    assert not any(retryable_status(s) for s in (400, 401, 404, 409, 422, 501, 505))


def forward_late(listen: str, target: str, delay: float) -> threading.Thread:
    """A TCP forwarder of one connection from listen to target that starts listening after delay."""

    def pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                b.shutdown(socket.SHUT_WR)

    def run() -> None:
        time.sleep(delay)
        host, port = listen.split(":")
        thost, tport = target.split(":")
        with socket.create_server((host, int(port))) as srv:
            srv.settimeout(10)
            conn, _ = srv.accept()
            with conn, socket.create_connection((thost, int(tport))) as up:
                back = threading.Thread(target=pipe, args=(up, conn), daemon=True)
                back.start()
                pipe(conn, up)
                back.join(10)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_connection_errors_are_retried_until_the_server_answers(deployment: Deployment) -> None:
    """A request refused at the transport is sent again, jittered, until it gets through."""
    addr = free_addr()
    fwd = forward_late(addr, deployment.url.removeprefix("http://"), 0.5)
    started = time.monotonic()
    with (
        jobgate.Client("http://" + addr, deployment.token("py", "late"), journal=False) as c,
        pytest.raises(jobgate.NotFoundError),
    ):
        c.get("job_late")
    assert time.monotonic() - started >= 0.5
    fwd.join(10)
