"""The README's snippets, run as a user would: the client script, and the worker killed mid-job."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Deployment, Proc, child_env, spawn, until

import jobgate

README = Path(__file__).resolve().parents[1] / "README.md"


def snippet(name: str) -> str:
    m = re.search(rf"<!-- readme-test: {name} -->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert m, f"README has no {name} snippet"
    code = m.group(1)
    assert len(code.rstrip().splitlines()) <= 30, f"the {name} snippet is longer than 30 lines"
    return code


def test_client_snippet(deployment: Deployment, tmp_path: Path) -> None:
    (tmp_path / "submit.py").write_text(snippet("client"))
    env = child_env(
        JOBGATE_URL=deployment.url,
        JOBGATE_TOKEN=deployment.token("readme", "ada"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    run = subprocess.run(
        [sys.executable, "submit.py"], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert "succeeded 63/63 pages" in run.stdout
    assert (tmp_path / "report.pdf").read_bytes().startswith(b"%PDF-")


def test_worker_snippet_killed_mid_job_is_taken_over(deployment: Deployment, tmp_path: Path) -> None:
    (tmp_path / "sales_export.py").write_text(snippet("worker"))
    cred = deployment.worker_credential("sales_export")
    env = child_env(
        JOBGATE_NATS_URL=deployment.nats_url, JOBGATE_WORKER_USER=cred["user"], JOBGATE_WORKER_PASSWORD=cred["password"]
    )
    first: Proc = spawn("readme-worker-1", [str(tmp_path / "sales_export.py")], env)
    second: Proc | None = None
    try:
        with jobgate.Client(deployment.url, deployment.token("readme", "bob"), journal=False) as c:

            def declared() -> jobgate.Job | None:
                try:
                    return c.submit("sales_export", {"region": "north", "rows": 400})
                except jobgate.ValidationError:
                    return None

            job: jobgate.Job = until(declared, 30, "sales_export declared")
            with pytest.raises(jobgate.ValidationError):
                c.submit("sales_export", {"region": "x" * 33})
            until(lambda: (j := c.get(job.id)).progress is not None and j.progress.done > 0, 30, "progress")
            first.signal(signal.SIGKILL)
            first.exit_code(10)
            second = spawn("readme-worker-2", [str(tmp_path / "sales_export.py")], env)
            done = c.wait(job.id, timeout=90)
            assert done.state == "succeeded", done.error
            assert done.attempt == 2
            c.download(job.id, tmp_path / "sales.csv")
            lines = (tmp_path / "sales.csv").read_text().splitlines()
            assert lines[0] == "row,region,amount" and len(lines) == 401 and lines[-1] == "399,north,2793"
            moon = c.wait(c.submit("sales_export", {"region": "moon"}).id, timeout=30)
            assert moon.state == "failed" and moon.error is not None
            assert moon.error.message == "no sales on the moon"
        second.signal(signal.SIGTERM)
        assert second.exit_code(20) == 0, "".join(second.stderr[-20:])
    finally:
        for p in (first, second):
            if p is not None and p.popen.poll() is None:
                p.popen.kill()
