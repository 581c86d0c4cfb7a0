"""A real ``jobgate serve`` for the whole session (no mocks of jobgate), and worker processes."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(os.environ.get("JOBGATE_BIN", ROOT / "bin" / "jobgate"))
HERE = Path(__file__).resolve().parent


def free_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBGATE_")}
    env.update(extra)
    return env


@dataclass
class Deployment:
    url: str
    nats_url: str
    data_dir: Path
    log: Path

    def jobgate(self, *args: str) -> str:
        out = subprocess.run(
            [str(BIN), *args, "--data-dir", str(self.data_dir)],
            check=True,
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=30,
        )
        return out.stdout.strip()

    def token(self, tenant: str, subject: str, *extra: str) -> str:
        return self.jobgate("token", "--tenant", tenant, "--subject", subject, *extra)

    def worker_credential(self, *types: str) -> dict[str, str]:
        args = ["nats-user", "--worker", "--json"]
        for t in types:
            args += ["--type", t]
        cred: dict[str, str] = json.loads(self.jobgate(*args))
        return cred


@pytest.fixture(scope="session")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    if not BIN.exists():
        pytest.fail(f"{BIN} is missing: run `make build` first")
    data = tmp_path_factory.mktemp("jobgate-data")
    http_addr, nats_addr = free_addr(), free_addr()
    log = data.parent / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN), "serve", "--data-dir", str(data), "--http-addr", http_addr, "--nats-listen", nats_addr],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env(),
            start_new_session=True,
        )
    d = Deployment(f"http://{http_addr}", f"nats://{nats_addr}", data, log)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(d.url + "/readyz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("jobgate serve not ready:\n" + log.read_text()[-4000:])
        time.sleep(0.05)
    try:
        yield d
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """``jobgate serve --dev`` of its own: the session's serve refuses loopback endpoints, as production does."""
    data = tmp_path_factory.mktemp("jobgate-dev-data")
    http_addr, nats_addr = free_addr(), free_addr()
    log = data.parent / "serve-dev.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN), "serve", "--dev", "--data-dir", str(data), "--http-addr", http_addr, "--nats-listen", nats_addr],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env(),
            start_new_session=True,
        )
    d = Deployment(f"http://{http_addr}", f"nats://{nats_addr}", data, log)

    def ready() -> bool:
        if proc.poll() is not None:
            pytest.fail("jobgate serve --dev exited:\n" + log.read_text()[-4000:])
        try:
            return httpx.get(d.url + "/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    until(ready, 60, "jobgate serve --dev ready")
    try:
        yield d
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Proc:
    """A child process printing one JSON event a line (tests/workers.py and tests/submitter.py)."""

    name: str
    popen: subprocess.Popen[str]
    events: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    seen: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    def wait_event(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 30, what: str = "") -> dict[str, Any]:
        for e in self.seen:
            if pred(e):
                return e
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{self.name}: no {what or 'event'} within {timeout}s; saw {self.seen}\n"
                    + "".join(self.stderr[-40:])
                )
            try:
                e = self.events.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            self.seen.append(e)
            if pred(e):
                return e

    def signal(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def exit_code(self, timeout: float) -> int:
        return self.popen.wait(timeout)


def spawn(name: str, args: list[str], env: dict[str, str]) -> Proc:
    popen = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=HERE
    )
    p = Proc(name, popen)

    def read_out() -> None:
        assert popen.stdout is not None
        for line in popen.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict):
                p.events.put(e)

    def read_err() -> None:
        assert popen.stderr is not None
        for line in popen.stderr:
            p.stderr.append(line)

    threading.Thread(target=read_out, daemon=True).start()
    threading.Thread(target=read_err, daemon=True).start()
    return p


@pytest.fixture
def procs() -> Iterator[Callable[[str, list[str], dict[str, str]], Proc]]:
    started: list[Proc] = []

    def start(name: str, args: list[str], env: dict[str, str]) -> Proc:
        p = spawn(name, args, env)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.popen.poll() is None:
            p.popen.kill()
        p.popen.wait()


def until(pred: Callable[[], Any], timeout: float = 20, what: str = "condition") -> Any:
    """Polls pred until it returns something truthy (no sleeps to wait for work: a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def idle_type(deployment: Deployment) -> str:
    """A declared type with no worker running: its jobs stay queued until canceled."""
    cred = deployment.worker_credential("py_idle")
    env = child_env(
        JOBGATE_NATS_URL=deployment.nats_url,
        JOBGATE_WORKER_USER=cred["user"],
        JOBGATE_WORKER_PASSWORD=cred["password"],
        TYPES="py_idle",
        WORKER_NAME="idle",
    )
    p = spawn("idle-declarer", ["workers.py"], env)
    token = deployment.token("py", "idle-probe")
    try:
        until(
            lambda: (
                httpx.get(
                    f"{deployment.url}/v1/types/py_idle", headers={"Authorization": f"Bearer {token}"}, timeout=5
                ).status_code
                == 200
            ),
            30,
            "py_idle declared",
        )
    finally:
        p.popen.send_signal(signal.SIGTERM)
        p.popen.wait(20)
    return "py_idle"


# The conformance suite (`jobgate conformance`) against this package's worker runs in the background
# from the start of the session, beside the other tests (it mostly waits: a retry's backoff, a claim
# going stale); tests/test_conformance.py reads its outcome last.
CONFORMANCE: dict[str, Any] = {}


def conformance_cmd(impl: str, *only: str) -> list[str]:
    cmd = [
        str(BIN),
        "conformance",
        "--worker-cmd",
        f"{sys.executable} conformance_worker.py",
        "--dir",
        str(HERE),
        "--name",
        impl,
    ]
    return [*cmd, "--only", ",".join(only)] if only else cmd


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda it: it.path.name == "test_conformance.py")


def pytest_collection_finish(session: pytest.Session) -> None:
    if not any(it.path.name == "test_conformance.py" for it in session.items) or not BIN.exists():
        return
    out = Path(tempfile.mkdtemp(prefix="jobgate-conformance-"))
    runs = {
        # Sync handlers through every scenario; async ones through those that differ for them.
        "py": (conformance_cmd("py"), {}),
        "pya": (
            conformance_cmd("pya", "result", "progress", "cancel", "timeout", "oversize", "lease"),
            {"CONF_ASYNC": "1"},
        ),
    }
    for name, (cmd, extra) in runs.items():
        log = (out / f"{name}.log").open("w")
        CONFORMANCE[name] = (
            subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(**extra), start_new_session=True),
            out / f"{name}.log",
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for proc, _ in CONFORMANCE.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
