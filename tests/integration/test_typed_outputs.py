"""Typed results and the async driver, on the session's Ray.

``output_type=SomeModel`` on a job (team or skill) holds its answer to the model's schema and
gives it back as an instance; a planned subtask takes a model class as its ``output_schema``.
``await rt.asubmit(...)``, ``async for e in job.aevents()`` and ``await job.aresult()`` run
beside the blocking calls, on the caller's loop.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
import ray
from pydantic import BaseModel

from raytroupe import runtime
from raytroupe.protocols import (
    AgentSpec,
    ConfigError,
    InvalidInput,
    JobFailed,
    JobOrder,
    PlannedSubtask,
    QualityGateFailed,
    ScriptedTurn,
    SkillSpec,
    Submitter,
)

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

_ids = itertools.count()


class Product(BaseModel):
    answer: int
    unit: str


GOOD = '{"answer": 42, "unit": "items"}'


def _script(*texts: str) -> runtime.ScriptedModel:
    return runtime.ScriptedModel(turns=tuple(ScriptedTurn(text=t) for t in texts))


def _team(*aggregated: str, output_schema: object = None) -> runtime.Team:
    """One planned subtask; the planner model's scripted answers are the aggregations."""
    n = next(_ids)
    return runtime.Team(
        name=f"typed-{n}",
        planner_model=f"typed-planner-{n}",
        models={
            f"typed-planner-{n}": _script(*aggregated),
            f"typed-solver-{n}": _script("Six times seven is 42 items."),
        },
        plan=[PlannedSubtask(id="s1", role="solver", instructions="Multiply six by seven.")],
        agents=[AgentSpec(name=f"typed-solver-{n}", role="solver", model=f"typed-solver-{n}")],
        output_schema=output_schema,
    )


def test_run_returns_an_instance_of_the_output_type(rt):
    assert rt.run("What is six times seven?", _team(GOOD), output_type=Product) == Product(
        answer=42, unit="items"
    )


def test_the_output_type_is_the_jobs_schema_so_the_gate_sends_a_wrong_shape_back(rt):
    # the team has no schema of its own: the job's type is what the first answer fails
    job = rt.submit("What is six times seven?", _team('{"answer": "forty-two"}', GOOD),
                    output_type=Product)  # fmt: skip
    assert job.output(timeout=60) == Product(answer=42, unit="items")
    result = job.result(timeout=60)
    assert result.usage.calls == 3  # the solver, then two aggregations
    assert result.output.data == {"answer": 42, "unit": "items"}


def test_an_answer_that_never_fits_the_type_fails_the_job_with_the_gates_reasons(rt):
    job = rt.submit("What is six times seven?", _team("42 items", "still 42 items"),
                    output_type=Product)  # fmt: skip
    with pytest.raises(JobFailed) as failed:
        job.output(timeout=60)
    error = failed.value.detail["result"].error
    assert error.code == "quality_gate"
    assert "the job's answer failed its checks" in error.message


def test_a_job_without_an_output_type_is_read_as_text_and_refuses_output(rt):
    job = rt.submit("What is six times seven?", _team("Forty-two items."))
    assert job.result(timeout=60).answer == "Forty-two items."
    with pytest.raises(ConfigError, match="without an output_type"):
        job.output()
    with pytest.raises(QualityGateFailed, match="not JSON"):
        job.result(timeout=60).output_as(Product)


def test_a_planned_subtask_takes_a_model_class_and_its_output_reads_back_typed(rt):
    n = next(_ids)
    step = PlannedSubtask(id="s1", role="solver", instructions="As JSON.", output_schema=Product)
    assert step.output_schema == Product.model_json_schema()
    team = runtime.Team(
        name=f"typed-step-{n}",
        planner_model="offline",
        models={f"typed-step-{n}": _script('{"answer": "x"}', GOOD)},
        plan=[step],
        agents=[AgentSpec(name=f"typed-step-{n}", role="solver", model=f"typed-step-{n}")],
    )
    (sub,) = rt.submit("What is six times seven?", team).result(timeout=60).subtasks
    assert sub.gate_retries == 1  # the first output failed the class's schema
    assert sub.output_as(Product) == Product(answer=42, unit="items")


def test_a_skill_job_takes_the_output_type_over_the_skills_schema(rt):
    ray.get(rt.actor("llm/0").configure.remote({"typed-skill-m": _script('{"answer": 1}', GOOD)}))
    rt.put_skill(
        SkillSpec.model_validate(
            {
                "name": "typed-skill",
                "version": "1",
                "description": "multiplies, for the typed-output test",
                "execution_mode": "direct",
                "prompt": {"instructions": "Answer as JSON."},
                "llm": {"alias": "typed-skill-m"},
                "quality_gate": {"max_retries": 1},
            }
        )
    )
    out = rt.run("What is six times seven?", skill="typed-skill", output_type=Product)
    assert out == Product(answer=42, unit="items")


def test_a_job_schema_that_is_not_json_schema_is_refused_before_anything_starts(rt):
    order = JobOrder(task="x", team=_team(GOOD).spec(), output_schema={"type": 5})
    bad = rt.client.submit(order, Submitter())
    with pytest.raises(InvalidInput, match="output_schema is not a valid JSON Schema"):
        rt._run(bad)


def test_the_async_driver_submits_follows_and_awaits_on_the_callers_loop(rt):
    async def main() -> tuple[list[str], Product, str, list[Product]]:
        job = await rt.asubmit("What is six times seven?", _team(GOOD), output_type=Product)
        types = [e.type async for e in job.aevents(timeout=120)]
        out = await job.aoutput(timeout=60)
        status = await job.astatus()
        # two jobs at once on one loop: neither call blocks it
        both = await asyncio.gather(
            rt.arun("Six times seven?", _team(GOOD), output_type=Product),
            rt.arun("Seven times six?", _team(GOOD), output_type=Product),
        )
        return types, out, status, list(both)

    types, out, status, both = asyncio.run(main())
    assert types[0] == "job_submitted"
    assert types[-1] == "job_succeeded"
    assert "subtask_finished" in types
    assert out == Product(answer=42, unit="items")
    assert status == "succeeded"
    assert both == [Product(answer=42, unit="items")] * 2


def test_the_async_handle_cancels_and_reports_the_cancellation(rt):
    n = next(_ids)
    slow = runtime.OfflineModel(latency_s=60.0)
    team = runtime.Team(
        name=f"typed-cancel-{n}",
        planner_model="offline",
        models={f"typed-cancel-{n}": slow},
        plan=[PlannedSubtask(id="s1", role="solver", instructions="Wait.")],
        agents=[AgentSpec(name=f"typed-cancel-{n}", role="solver", model=f"typed-cancel-{n}")],
    )

    async def main() -> str:
        job = await rt.asubmit("Take your time.", team)
        async for event in job.aevents(timeout=60):
            if event.type == "subtask_started":
                break
        assert await job.acancel()
        with pytest.raises(runtime.JobCancelled):
            await job.aresult(timeout=60)
        return await job.astatus()

    assert asyncio.run(main()) == "cancelled"
