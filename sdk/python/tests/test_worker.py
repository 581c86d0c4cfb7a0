"""Python worker processes (tests/workers.py) against a real ``jobgate serve``: what the job's owner sees."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Deployment, Proc, child_env, spawn, until

import jobgate

MAIN_TYPES = ("py_echo", "py_async_echo", "py_fail", "py_hold_async", "py_bytes")


def worker_env(d: Deployment, types: tuple[str, ...], name: str, gates: Path, **extra: str) -> dict[str, str]:
    cred = d.worker_credential(*types)
    return child_env(
        JOBGATE_NATS_URL=d.nats_url,
        JOBGATE_WORKER_USER=cred["user"],
        JOBGATE_WORKER_PASSWORD=cred["password"],
        TYPES=",".join(types),
        WORKER_NAME=name,
        GATE_DIR=str(gates),
        **extra,
    )


@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gates")


@pytest.fixture(scope="module")
def main_worker(deployment: Deployment, gates: Path) -> Iterator[Proc]:
    """One worker process for the module's simple types."""
    p = spawn("py-main", ["workers.py"], worker_env(deployment, MAIN_TYPES, "py-main", gates))
    yield p
    p.signal(signal.SIGTERM)
    assert p.exit_code(30) == 0, "".join(p.stderr[-40:])


@pytest.fixture
def c(deployment: Deployment, main_worker: Proc) -> Iterator[jobgate.Client]:
    with jobgate.Client(deployment.url, deployment.token("py", "worker-tests"), journal=False) as cl:
        # The type is declared once the worker started: admission answers 202 from then on.
        yield cl


def submit(c: jobgate.Client, typ: str, params: dict[str, Any]) -> jobgate.Job:
    """Submits as soon as the type is declared (a worker declares it on start)."""

    def attempt() -> jobgate.Job | None:
        try:
            return c.submit(typ, params, fresh=True)
        except jobgate.ValidationError as e:
            if any(f.field == "/type" for f in e.errors):
                return None
            raise

    job: jobgate.Job = until(attempt, 30, f"{typ} declared")
    return job


@pytest.mark.parametrize("typ", ["py_echo", "py_async_echo"])
def test_success_with_result_and_progress(c: jobgate.Client, tmp_path: Path, typ: str) -> None:
    job = submit(c, typ, {"text": "hello", "lines": 4})
    done = c.wait(job.id, timeout=30)
    assert done.state == "succeeded", done.error
    assert done.attempt == 1
    assert done.progress == jobgate.Progress(4, 4, "lines")
    assert done.result is not None and done.result.content_type == "text/plain"
    c.download(job.id, tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == "".join(f"{i} hello\n" for i in range(1, 5))


def test_schema_generated_from_the_dataclass(c: jobgate.Client, deployment: Deployment) -> None:
    submit(c, "py_echo", {"text": "x"})  # declared by now
    r = httpx.get(f"{deployment.url}/v1/types/py_echo", headers={"Authorization": f"Bearer {c._token}"}, timeout=10)
    assert r.status_code == 200, r.text
    decl = r.json()
    schema = decl["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["text"]
    assert schema["properties"]["text"] == {"type": "string", "maxLength": 64}
    assert schema["properties"]["lines"] == {"type": "integer", "minimum": 1, "maximum": 1000, "default": 3}
    assert decl["description"] == "Repeats a text"
    # The gateway validates against it: unknown and out-of-range params are a 422 naming them.
    with pytest.raises(jobgate.ValidationError) as e:
        c.submit("py_echo", {"text": "x", "lines": 0, "colour": "red"})
    assert {"/params/lines", "/params/colour"} <= {f.field for f in e.value.errors}, e.value.errors
    # The defaults apply: lines = 3.
    job = c.submit("py_echo", {"text": "dflt"}, fresh=True)
    assert c.wait(job.id, timeout=30).progress == jobgate.Progress(3, 3, "lines")


def test_results_stream_in_chunks_within_the_limit(c: jobgate.Client, tmp_path: Path) -> None:
    size = 600_001  # three chunks, the last one short
    job = submit(c, "py_bytes", {"size": size})
    done = c.wait(job.id, timeout=30)
    assert done.state == "succeeded", done.error
    got = c.download(job.id, tmp_path / "bytes.bin")
    assert got.size == size and (tmp_path / "bytes.bin").read_bytes() == bytes((i * 31) & 0xFF for i in range(size))
    # Past the type's max_result_bytes (1 MiB) the attempt fails, and no retry helps it.
    big = c.wait(c.submit("py_bytes", {"size": 1_500_000}, fresh=True).id, timeout=30)
    assert big.state == "failed" and big.error is not None
    assert big.error.category == "budget_exceeded", big.error
    assert big.result is None


def test_handler_exception_fails_the_job(c: jobgate.Client) -> None:
    plain = submit(c, "py_fail", {})
    failed = c.wait(plain.id, timeout=30)
    assert failed.state == "failed"
    # A user's type fails handler_error (render_error is the built-in permit_report's; jobgate
    # before the protocol's kind table said render_error for both).
    assert failed.error is not None and failed.error.category in ("handler_error", "render_error")
    # The exception's text reached the operator only, never the job's owner.
    assert "db-7" not in failed.error.message
    sealed = c.submit("py_fail", {"permanent": True}, fresh=True)
    failed = c.wait(sealed.id, timeout=30)
    assert failed.state == "failed" and failed.error is not None
    assert failed.error.message == "case 13 is sealed" and not failed.error.retryable
    assert failed.error.category in ("handler_error", "render_error")


def test_cancel_is_seen_by_an_async_handler(c: jobgate.Client, main_worker: Proc) -> None:
    job = submit(c, "py_hold_async", {"gate": "cancel-async"})
    main_worker.wait_event(lambda e: e.get("event") == "started" and e.get("id") == job.id, 30, "handler start")
    assert c.cancel(job.id).state == "canceled"
    ev = main_worker.wait_event(lambda e: e.get("event") == "aborted" and e.get("id") == job.id, 10, "abort")
    assert ev["reason"] == "canceled" and ev["canceled"] is True
    main_worker.wait_event(lambda e: e.get("event") == "attempt" and e.get("outcome") == "lost", 10, "outcome")
    assert c.get(job.id).state == "canceled"


@pytest.fixture
def hold(deployment: Deployment, gates: Path, procs: Callable[[str, list[str], dict[str, str]], Proc]) -> Any:
    """Starts py_hold worker processes (one credential for all of them)."""

    def start(name: str, **extra: str) -> Proc:
        return procs(name, ["workers.py"], worker_env(deployment, ("py_hold",), name, gates, **extra))

    return start


def test_cancel_is_seen_by_job_canceled_in_a_sync_handler(c: jobgate.Client, hold: Any) -> None:
    w: Proc = hold("py-cancel")
    job = submit(c, "py_hold", {"gate": "cancel-sync"})
    w.wait_event(lambda e: e.get("event") == "started" and e.get("id") == job.id, 30, "handler start")
    assert c.cancel(job.id).state == "canceled"
    ev = w.wait_event(lambda e: e.get("event") == "aborted" and e.get("id") == job.id, 10, "job.canceled")
    assert ev["reason"] == "canceled" and ev["canceled"] is True
    w.wait_event(lambda e: e.get("event") == "attempt" and e.get("outcome") == "lost", 10, "outcome")
    w.signal(signal.SIGTERM)
    assert w.exit_code(20) == 0


def test_killed_worker_job_is_taken_over_by_another_process(c: jobgate.Client, hold: Any, gates: Path) -> None:
    a: Proc = hold("py-crash")
    job = submit(c, "py_hold", {"gate": "takeover"})
    a.wait_event(lambda e: e.get("event") == "started" and e.get("id") == job.id, 30, "handler start")
    until(lambda: (j := c.get(job.id)).progress is not None and j.progress.done == 1, 10, "progress 1 of 2")
    a.signal(signal.SIGKILL)
    assert a.exit_code(10) == -signal.SIGKILL
    killed = time.monotonic()
    (gates / "takeover").touch()
    b: Proc = hold("py-rescue")
    done = c.wait(job.id, timeout=60)
    assert done.state == "succeeded", done.error
    assert done.attempt == 2, "the second process took the crashed attempt over"
    b.wait_event(lambda e: e.get("event") == "started" and e.get("id") == job.id and e.get("attempt") == 2, 5)
    assert c.download(job.id, gates / "takeover.out").size > 0
    assert (gates / "takeover.out").read_text() == "done by py-rescue at attempt 2\n"
    print(f"taken over and finished {time.monotonic() - killed:.1f}s after the SIGKILL")
    b.signal(signal.SIGTERM)
    assert b.exit_code(20) == 0


def test_sigterm_gives_running_jobs_back(c: jobgate.Client, hold: Any, gates: Path) -> None:
    a: Proc = hold("py-drain", DRAIN="0.5")
    job = submit(c, "py_hold", {"gate": "drain"})
    a.wait_event(lambda e: e.get("event") == "started" and e.get("id") == job.id, 30, "handler start")
    stopped = time.monotonic()
    a.signal(signal.SIGTERM)
    assert a.exit_code(15) == 0, "".join(a.stderr[-40:])
    took = time.monotonic() - stopped
    ev = a.wait_event(lambda e: e.get("event") == "aborted" and e.get("id") == job.id, 1, "abort")
    assert ev["reason"] == "shutdown" and ev["canceled"] is False
    a.wait_event(lambda e: e.get("event") == "attempt" and e.get("outcome") == "given_back", 1, "give-back")
    a.wait_event(lambda e: e.get("event") == "stopped", 1, "stop")
    back = c.get(job.id)
    assert back.state == "running" and back.error is None, back
    # Another worker runs it at once: the give-back used up none of its attempts.
    (gates / "drain").touch()
    hold("py-after-drain")
    done = c.wait(job.id, timeout=30)
    assert done.state == "succeeded", done.error
    assert (gates / "drain").exists() and done.attempt == 2
    assert took < 5, f"the worker took {took:.1f}s to stop"


def test_sigterm_abandons_a_handler_that_ignores_its_abort(
    c: jobgate.Client, hold: Any, deployment: Deployment, gates: Path, procs: Any
) -> None:
    """A sync handler that never returns cannot be interrupted: after the drain and as long again the
    process exits anyway, leaving the claim to go stale (jobgate hands the job on)."""
    w: Proc = procs(
        "py-stubborn", ["workers.py"], worker_env(deployment, ("py_stubborn",), "py-stubborn", gates, DRAIN="0.5")
    )
    job = submit(c, "py_stubborn", {"gate": "never-opened"})
    w.wait_event(lambda e: e.get("event") == "started" and e.get("id") == job.id, 30, "handler start")
    w.signal(signal.SIGTERM)
    assert w.exit_code(10) == 0, "".join(w.stderr[-40:])
    w.wait_event(lambda e: e.get("event") == "stopped", 1, "stop")
    still = c.get(job.id)
    assert still.state == "running" and still.attempt == 1
    c.cancel(job.id)
