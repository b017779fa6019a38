"""Isolated runs at once, as a fan-out job makes them (needs root and namespaces).

- The isolation probe under uvloop (Ray's event loop): each of several calls arriving at a
  fresh sandbox used to start its own probe, each spawning from an event loop of its own in a
  thread; uvloop refuses a spawn while another loop of the process is spawning ("Racing with
  another loop to spawn a process"), so some calls failed.
- One job's python calls share its scratch directory: each used to write ``main.py`` there,
  so concurrent calls ran whichever program was written last (or failed to write theirs).
"""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from raytroupe.actors.tools.isolation import Isolation


def test_concurrent_first_isolated_runs_share_one_probe(tmp_path):
    ok, reason = Isolation().probe()  # another instance: the one under test has not probed
    if not ok:
        pytest.fail(f"this host cannot isolate, so the test cannot run: {reason}")
    iso = Isolation()
    policy = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())  # the probes' own loops too
    try:

        async def runs():
            return await asyncio.gather(
                *(iso.run_python("print(6 * 7)", scratch=tmp_path / f"s{i}") for i in range(8))
            )

        results = asyncio.run(runs())
    finally:
        asyncio.set_event_loop_policy(policy)
    assert [(r.exit_code, r.stdout) for r in results] == [(0, "42\n")] * 8
    assert {r.isolation for r in results} == {"namespaces"}


def test_concurrent_python_runs_in_one_scratch_each_run_their_own_code(tmp_path):
    iso = Isolation()
    ok, reason = iso.probe()
    if not ok:
        pytest.fail(f"this host cannot isolate, so the test cannot run: {reason}")
    scratch = tmp_path / "one-job"  # the calls of one job share its scratch directory

    async def runs():
        return await asyncio.gather(
            *(iso.run_python(f"print({i})", scratch=scratch) for i in range(12))
        )

    results = asyncio.run(runs())
    assert [(r.exit_code, r.stdout) for r in results] == [(0, f"{i}\n") for i in range(12)]
    assert [p.name for p in scratch.iterdir()] == []  # no program left behind
