"""Calling an actor that was just killed and is coming back."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import RayActorError

from raytroupe.actors.ray_handles import NAMESPACE
from raytroupe.runtime.handle import JobHandle


def after_restart(make_call: Callable[[], Any], within_s: float = 60.0) -> Any:
    """The result of ``make_call()`` (a Ray call), made again until its actor is back.

    Right after a kill, a call may find the actor dead (before Ray notices the restart) or
    restarting; both are retried, with a growing pause, for ``within_s`` at most.
    """

    async def call() -> Any:
        deadline, pause = time.monotonic() + within_s, 0.05
        while True:
            try:
                return await make_call()
            except RayActorError:
                if time.monotonic() + pause > deadline:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)

    return asyncio.run(call())


def pid_of(handle: Any) -> int:
    """The process id of ``handle``'s actor (waiting for it if it is restarting)."""
    pid: int = after_restart(lambda: handle.__ray_call__.remote(lambda _self: os.getpid()))
    return pid


def kill_and_wait_for_restart(handle: Any, within_s: float = 60.0) -> None:
    """Kill ``handle``'s actor and return once Ray has brought it back in a new process.

    ``ray.kill`` is asynchronous: a call made right after it may still reach the old process.
    """
    before = pid_of(handle)
    ray.kill(handle, no_restart=False)
    deadline = time.monotonic() + within_s
    while pid_of(handle) == before:
        if time.monotonic() > deadline:
            raise AssertionError(f"the actor was not restarted within {within_s} s")
        time.sleep(0.1)


def node_of(actor_name: str) -> str | None:
    """The node id of a live named actor of the troupe, from the GCS actor table (None if not
    alive)."""
    handle = ray.get_actor(actor_name, namespace=NAMESPACE)
    info = ray._private.state.state.actor_table(handle._actor_id.hex())
    if not info or info.get("State") != "ALIVE":
        return None
    node: str = info["Address"]["NodeID"]
    return node


def wait_started(job: JobHandle, timeout: float = 60.0) -> None:
    """Until a subtask of ``job`` started (fails if the job ended first)."""
    for event in job.events(timeout=timeout):
        if event.type == "subtask_started":
            return
    raise AssertionError(f"{job.job_id} ended before a subtask started")


def until_status(check: Callable[[], str], wanted: str, within_s: float = 60.0) -> None:
    """Ask ``check()`` (a job's status) until it says ``wanted``, through an actor's restart.

    Raises:
        AssertionError: it never did within ``within_s``.
    """
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if check() == wanted:
                return
        except RayActorError:  # the actor is coming back
            pass
        time.sleep(0.1)
    raise AssertionError(f"never {wanted}")
