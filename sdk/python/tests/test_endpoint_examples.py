"""examples/endpoint-python and the README's endpoint snippet end to end, as the example's README walks
through: types.yaml declared with ``jobgate types apply -f``, the app run with the secret it printed, a
job submitted over HTTP succeeding with the app's greeting."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
from conftest import BIN, ROOT, Deployment, child_env, free_addr, until

EXAMPLE = ROOT / "examples" / "endpoint-python"
README = ROOT / "sdk" / "python" / "README.md"


def test_the_python_example_runs_a_job(dev: Deployment, tmp_path: Path) -> None:
    run_greeting(dev, tmp_path, EXAMPLE / "app.py", "greeting_python")


def test_the_readme_endpoint_runs_a_job(dev: Deployment, tmp_path: Path) -> None:
    m = re.search(r"<!-- readme-test: endpoint -->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert m, "README.md has no endpoint snippet"
    assert len(m.group(1).rstrip().splitlines()) <= 30, "the endpoint snippet is longer than 30 lines"
    app = tmp_path / "greeting_app.py"
    app.write_text(m.group(1))
    run_greeting(dev, tmp_path, app, "greeting_readme")


def run_greeting(dev: Deployment, tmp_path: Path, app_py: Path, name: str) -> None:
    """Declares examples/endpoint-python/types.yaml's type as ``name`` with ``jobgate types apply -f``, runs
    ``app_py`` with the secret printed, and sees a job succeed with its greeting."""
    addr = free_addr()
    decl = tmp_path / "types.yaml"
    text = (EXAMPLE / "types.yaml").read_text()
    assert "http://127.0.0.1:9091/jobs/greeting" in text and "name: greeting_python\n" in text
    decl.write_text(text.replace("127.0.0.1:9091", addr).replace("name: greeting_python\n", f"name: {name}\n"))
    ops = dev.jobgate("token", "--operator", "--subject", "ops")
    out = subprocess.run(
        [str(BIN), "types", "apply", "-f", str(decl), "--url", dev.url, "--token", ops],
        check=True,
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=30,
    ).stdout
    m = re.search(r"^(\w+): created \(secret (whsec_\S+?):", out, re.M)
    assert m and m.group(1) == name, out
    secret = m.group(2)

    port = addr.rsplit(":", 1)[1]
    app = subprocess.Popen(
        [sys.executable, str(app_py)],
        env=child_env(JOBGATE_ENDPOINT_SECRET=secret, PORT=port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: _up(f"http://{addr}/jobs/greeting") or app.poll() is not None, 20, "the example listening")
        assert app.poll() is None, app.stderr.read() if app.stderr else ""
        user = dev.token("acme", "ann")
        auth = {"Authorization": f"Bearer {user}"}
        until(lambda: httpx.get(f"{dev.url}/v1/types/{name}", headers=auth).status_code == 200, 10, "type visible")
        r = httpx.post(
            f"{dev.url}/v1/jobs",
            headers={**auth, "Idempotency-Key": f"hello-{name}"},
            json={"type": name, "params": {"name": "Ada", "language": "fr"}},
        )
        assert r.status_code in (200, 201, 202), r.text
        job_id = r.json()["id"]

        def ended() -> dict[str, object] | None:
            j: dict[str, object] = httpx.get(f"{dev.url}/v1/jobs/{job_id}", headers=auth).json()
            return j if j["state"] in ("succeeded", "failed", "canceled") else None

        job = until(ended, 60, "the job ended")
        assert job["state"] == "succeeded", job
        res = httpx.get(f"{dev.url}/v1/jobs/{job_id}/result", headers=auth, follow_redirects=True)
        assert res.text.startswith("Bonjour, Ada! (") and res.text.endswith("attempt 1)\n"), res.text
        # Unsigned: refused before any work.
        assert httpx.post(f"http://{addr}/jobs/greeting", content=b"{}").status_code == 401
    finally:
        app.terminate()
        app.wait(10)


def _up(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
        return True
    except httpx.TransportError:
        return False
