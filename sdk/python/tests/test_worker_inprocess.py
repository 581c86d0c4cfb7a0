"""Workers run inside the test's event loop: declarations refused, pydantic models, stop()."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest
from conftest import Deployment

import jobgate


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def worker_for(d: Deployment, *types: str) -> jobgate.Worker:
    cred = d.worker_credential(*types)
    return jobgate.Worker(d.nats_url, cred["user"], cred["password"], heartbeat=0.5, pull_wait=1.0)


def noop(job: jobgate.WorkerJob[dict[str, object]]) -> None:
    pass


@pytest.mark.anyio
async def test_a_schema_jobgate_refuses_fails_the_start(deployment: Deployment) -> None:
    w = worker_for(deployment, "py_unbounded")
    w.register("py_unbounded", noop, schema={"type": "object", "properties": {"s": {"type": "string"}}})
    with pytest.raises(jobgate.WireError) as e:
        await asyncio.wait_for(w.start(), 30)
    assert e.value.code == "invalid", e.value


@pytest.mark.anyio
async def test_a_type_of_another_credential_is_forbidden_at_once(deployment: Deployment) -> None:
    w = worker_for(deployment, "py_mine")
    w.register("py_not_mine", noop, schema={"type": "object", "additionalProperties": False})
    started = time.monotonic()
    with pytest.raises(jobgate.WireError) as e:
        await asyncio.wait_for(w.start(), 30)
    assert e.value.code == "forbidden", e.value
    assert time.monotonic() - started < 5, "the refusal came as fast as the server sent it"


def test_unbounded_models_are_refused_before_anything_is_sent() -> None:
    @dataclass
    class Open:
        name: str

    w = jobgate.Worker("nats://127.0.0.1:1", "u", "p")
    with pytest.raises(jobgate.SchemaError, match="max_length"):
        w.register("py_open", noop, params=Open)
    with pytest.raises(ValueError, match="schema= or a params model"):
        w.register("py_none", noop)
    with pytest.raises(ValueError, match="type name"):
        w.register("Py-Bad", noop, schema={})


class Invoice(pydantic.BaseModel):
    customer: str = pydantic.Field(max_length=40)
    amount_cents: int = pydantic.Field(ge=1, le=10_000_000)
    currency: str = pydantic.Field("EUR", max_length=3)


@pytest.mark.anyio
async def test_pydantic_params_and_stop(deployment: Deployment, tmp_path: Path) -> None:
    w = worker_for(deployment, "py_invoice")
    seen: list[object] = []

    @w.job_type("py_invoice", content_type="text/plain", timeout=30)
    async def invoice(job: jobgate.WorkerJob[Invoice]) -> None:
        seen.append(job.params)
        await job.output().awrite(
            f"{job.params.customer}: {job.params.amount_cents / 100:.2f} {job.params.currency}".encode()
        )

    decl = w.declaration("py_invoice")
    assert decl["schema"]["additionalProperties"] is False
    assert decl["schema"]["properties"]["customer"]["maxLength"] == 40
    running = asyncio.create_task(w.run_async(handle_signals=False))
    try:
        async with jobgate.AsyncClient(deployment.url, deployment.token("py", "inv"), journal=False) as c:
            deadline = time.monotonic() + 30
            while True:
                try:
                    job = await c.submit("py_invoice", {"customer": "Ada", "amount_cents": 1250})
                    break
                except jobgate.ValidationError:
                    assert time.monotonic() < deadline, "py_invoice never declared"
                    await asyncio.sleep(0.05)
            with pytest.raises(jobgate.ValidationError):
                await c.submit("py_invoice", {"customer": "Ada", "amount_cents": 0})
            done = await c.wait(job.id, timeout=30)
            assert done.state == "succeeded", done.error
            await c.download(job.id, tmp_path / "inv.txt")
        assert (tmp_path / "inv.txt").read_text() == "Ada: 12.50 EUR"
        assert seen == [Invoice(customer="Ada", amount_cents=1250, currency="EUR")]
    finally:
        await asyncio.wait_for(w.stop(), 30)
        await asyncio.wait_for(running, 5)


class CountingWorker(jobgate.Worker):
    """A worker that counts the declarations it sends."""

    declares = 0

    async def _request_once(self, nc: Any, subj: str, data: bytes, timeout: float, headers: Any) -> Any:
        if subj.endswith(".declare"):
            self.declares += 1
        return await super()._request_once(nc, subj, data, timeout, headers)


@pytest.mark.anyio
async def test_a_throttled_declaration_is_asked_again_after_the_wait_it_names(deployment: Deployment) -> None:
    """A credential changes its declarations a few times at once, then slowly: a start past that is
    refused throttled with retry_after_ms, and asks again once, after that wait (then starts)."""
    cred = deployment.worker_credential("py_changing")
    for n in range(10):
        w = CountingWorker(deployment.nats_url, cred["user"], cred["password"], pull_wait=1.0)
        w.register(
            "py_changing", noop, schema={"type": "object", "additionalProperties": False}, description=f"version {n}"
        )
        began = time.monotonic()
        await asyncio.wait_for(w.start(), 60)
        took = time.monotonic() - began
        await asyncio.wait_for(w.stop(), 30)
        if w.declares > 1:
            break
    assert w.declares == 2, f"{w.declares} declarations sent; the throttled one is asked again once"
    assert took >= 1.0, f"asked again after {took:.1f}s"


@pytest.mark.anyio
async def test_a_types_flow_control_is_declared_and_held(deployment: Deployment) -> None:
    """retry, concurrency_keys and rate_limit go with the declaration: jobgate shows them on the
    type, runs the jobs of one key value one at a time, and refuses a limit out of bounds."""
    in_flight: dict[int, int] = {}
    most: dict[int, int] = {}

    async def one_at_a_time(job: jobgate.WorkerJob[dict[str, Any]]) -> None:
        key = int(job.params.get("n", 0))
        in_flight[key] = in_flight.get(key, 0) + 1
        most[key] = max(most.get(key, 0), in_flight[key])
        await asyncio.sleep(0.08)
        in_flight[key] -= 1

    w = worker_for(deployment, "py_flow")
    w.register(
        "py_flow",
        one_at_a_time,
        schema={
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
            "additionalProperties": False,
        },
        concurrency=4,
        retry={"initial_seconds": 1, "max_seconds": 5, "multiplier": 2},
        concurrency_keys=[{"key": "/params/n", "limit": 1}],
        rate_limit={"per_second": 50, "burst": 10},
    )
    await asyncio.wait_for(w.start(), 30)
    try:
        token = deployment.token("py", "flow")
        async with jobgate.AsyncClient(deployment.url, token, journal=False) as c:
            jobs = [await c.submit("py_flow", {"n": i % 2}) for i in range(8)]
            for job in jobs:
                done = await c.wait(job.id, timeout=30)
                assert done.state == "succeeded", done.error
        assert most == {0: 1, 1: 1}, most
        async with httpx.AsyncClient() as h:
            r = await h.get(f"{deployment.url}/v1/types/py_flow", headers={"Authorization": f"Bearer {token}"})
        t = r.json()
        assert t["concurrency"] == [{"key": "/params/n", "limit": 1}]
        assert t["retry"] == {"initial_seconds": 1, "max_seconds": 5, "multiplier": 2}
        assert t["rate_limit"] == {"per_second": 50, "burst": 10}
    finally:
        await asyncio.wait_for(w.stop(), 30)

    bad = worker_for(deployment, "py_flow_bad")
    bad.register(
        "py_flow_bad",
        noop,
        schema={"type": "object", "additionalProperties": False},
        concurrency_keys=[{"key": "tenant", "limit": 5000}],
    )
    with pytest.raises(jobgate.WireError) as e:
        await asyncio.wait_for(bad.start(), 30)
    assert e.value.code == "invalid", e.value
