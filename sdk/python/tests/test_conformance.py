"""`jobgate conformance` drives this package's worker (tests/conformance_worker.py) through the
protocol's scenarios, as it does the Go and TypeScript workers (started by conftest at the session's
start, read here last)."""

from __future__ import annotations

import pytest
from conftest import CONFORMANCE


@pytest.mark.parametrize("impl", ["py", "pya"])
def test_the_python_worker_passes_the_conformance_suite(impl: str) -> None:
    if impl not in CONFORMANCE:
        pytest.fail("the conformance run did not start (bin/jobgate missing?)")
    proc, log = CONFORMANCE[impl]
    code = proc.wait(timeout=240)
    out = log.read_text()
    assert code == 0, out
    last = out.strip().splitlines()[-1]
    assert last.endswith(", 0 failed") and not last.startswith("0 passed"), out
