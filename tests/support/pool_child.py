"""Child process of tests/integration/test_example_configs.py: a driver of a running Ray.

``python -m tests.support.pool_child ADDRESS ASK`` joins the Ray at ADDRESS (as any driver
script does: loopback, its auth token), sends the LLM requests of ASK (JSON:
``{"requests": [LLMRequest, ...], "supervisors": [alias, ...]}``) to its pool ``llm/0`` one by
one, and prints one JSON line: the answers (or the typed error of each), the named actors,
the cluster's resources, and the info of each named local model's supervisor. It runs apart
from the test, whose own process is joined to the suite's Ray.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import ray

from raytroupe.actors.llm.gateway import CallContext
from raytroupe.actors.llm.local.ray_servers import model_actor_name
from raytroupe.actors.spawn import NAMESPACE
from raytroupe.protocols import LLMRequest, TroupeError
from raytroupe.runtime.joining import prepare_join


def _answer(pool: Any, request: LLMRequest) -> dict[str, Any]:
    context = CallContext(job_id="example-configs", tenant="default", agent="pool-child")
    try:
        return {"response": ray.get(pool.complete.remote(request, context)).model_dump(mode="json")}
    except TroupeError as exc:
        return {"error": {"type": type(exc).__name__, "message": exc.message}}


def main() -> None:
    address, ask = sys.argv[1], json.loads(sys.argv[2])
    prepare_join(address)
    ray.init(address=address, namespace=NAMESPACE, log_to_driver=False,
             logging_level=logging.WARNING)  # fmt: skip
    pool = ray.get_actor("llm/0", namespace=NAMESPACE)
    answers = [_answer(pool, LLMRequest.model_validate(r)) for r in ask.get("requests", [])]
    supervisors = {
        alias: ray.get(ray.get_actor(model_actor_name(alias), namespace=NAMESPACE).info.remote())
        for alias in ask.get("supervisors", [])
    }
    report = {
        "answers": answers,
        "actors": sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)),
        "total": ray.cluster_resources(),
        "available": ray.available_resources(),
        "supervisors": supervisors,
        "unservable": ray.get(pool.unservable.remote()),
    }
    ray.shutdown()
    print(json.dumps(report, default=str))  # noqa: T201 - the report, for the parent test


if __name__ == "__main__":
    main()
