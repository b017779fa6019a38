"""Function tools (ToolsConfig.functions): config, schema from signatures, calls, a job.

The functions below are the tools under test; they are named by import path through this
module's ``__name__``, as an operator names theirs.
"""

import asyncio
import datetime
import threading
from dataclasses import dataclass
from typing import Annotated, Literal

import pytest
from pydantic import Field, ValidationError
from wiring import InProcessProvisioner, Tap, control_plane, order, run, started, started_now

from raytroupe.actors import LLMAdapterPool, LocalRouterClient, MessageRouter
from raytroupe.actors.tools.config import FunctionTool, ToolsConfig
from raytroupe.actors.tools.functions import function_schema, import_target
from raytroupe.actors.tools.sandbox import ToolSandbox
from raytroupe.actors.tools.validation import coerce
from raytroupe.protocols import (
    AgentSpec,
    ConfigError,
    ErrorCode,
    LLMRequest,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
    ToolCall,
    ToolError,
)

HERE = __name__


def add(a: int, b: int = 2) -> int:
    """Add two integers.

    The second paragraph is not part of the description.
    """
    return a + b


def describe(
    name: Annotated[str, Field(description="Who.")],
    mood: Literal["calm", "busy"] = "calm",
    tags: list[int] | None = None,
    *,
    ratio: float = 1.0,
    loud: bool = False,
) -> dict:
    """Describe someone."""
    return {"name": name, "mood": mood, "tags": tags, "ratio": ratio, "loud": loud}


@dataclass
class Day:
    weekday: int
    iso: str


def weekday(day: datetime.date) -> Day:
    """The weekday of a date."""
    return Day(weekday=day.isoweekday(), iso=day.isoformat())


def undocumented(x: int) -> int:
    return x


def variadic(*numbers: int) -> int:
    """Sum numbers."""
    return sum(numbers)


def explode(message: str) -> None:
    """Always fails."""
    raise ValueError(message)


def refuse(reason: str) -> None:
    """Fails the way a tool should: with a ToolError the model can read."""
    raise ToolError(f"cannot do that: {reason}", reason=reason)


async def greet(name: str) -> str:
    """Greet, asynchronously."""
    await asyncio.sleep(0)
    return f"hello {name}"


GATE = threading.Event()
ENTERED = threading.Event()


def blocked(label: str) -> str:
    """Wait for the test to open the gate."""
    ENTERED.set()
    if not GATE.wait(timeout=30):
        raise RuntimeError("the test never opened the gate")
    return f"{label} done in {threading.current_thread().name}"


NOT_CALLABLE = 42


def config(tmp_path, **functions) -> ToolsConfig:
    return ToolsConfig(
        state_dir=tmp_path / "state", scratch_root=tmp_path / "scratch", functions=functions
    )


def call(tool, **arguments):
    return ToolCall(call_id="c1", tool=tool, arguments=arguments, task_id="t1", step=1)


async def granted(box, *tools):
    await box.grant("ada", list(tools))
    return box


# -- configuration -----------------------------------------------------------------------


def test_a_string_stands_for_a_function_tool_of_that_target():
    cfg = ToolsConfig(functions={"add": f"{HERE}:add"})
    assert cfg.functions["add"] == FunctionTool(target=f"{HERE}:add")
    assert cfg.functions["add"].timeout_s == 30.0


@pytest.mark.parametrize("target", ["add", "mod:", ":f", "a b:c", "mod:f()", "mod/x:f", "1mod:f"])
def test_a_target_must_be_an_import_path(target):
    with pytest.raises(ValidationError, match="import path"):
        FunctionTool(target=target)


def test_a_function_tool_may_not_take_a_builtin_name():
    with pytest.raises(ValidationError, match="taken by built-in tools"):
        ToolsConfig(functions={"python": f"{HERE}:add"})


def test_a_tool_name_must_be_a_valid_name():
    with pytest.raises(ValidationError):
        ToolsConfig(functions={"no spaces": f"{HERE}:add"})


# -- schema from the signature -----------------------------------------------------------


def test_the_schema_comes_from_the_signature_without_titles():
    schema, _ = function_schema(describe, tool="describe")
    assert schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "description": "Who."},
            "mood": {"enum": ["calm", "busy"], "type": "string", "default": "calm"},
            "tags": {
                "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}],
                "default": None,
            },
            "ratio": {"type": "number", "default": 1.0},
            "loud": {"type": "boolean", "default": False},
        },
        "required": ["name"],
    }


def test_a_property_named_title_is_kept():
    def titled(title: str) -> str:
        """Echo a title."""
        return title

    schema, _ = function_schema(titled, tool="titled")
    assert schema["properties"] == {"title": {"type": "string"}}


def test_parameters_that_cannot_be_passed_by_keyword_are_refused():
    with pytest.raises(ConfigError, match="cannot be passed by keyword"):
        function_schema(variadic, tool="variadic")

    def positional(a: int, /) -> int:
        """Positional only."""
        return a

    with pytest.raises(ConfigError, match="'a' cannot be passed by keyword"):
        function_schema(positional, tool="positional")


def test_an_annotation_without_a_json_schema_is_refused():
    def odd(lock: threading.Lock) -> None:  # type: ignore[valid-type]
        """Takes a lock."""

    with pytest.raises(ConfigError, match="no JSON Schema"):
        function_schema(odd, tool="odd")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module_here:f", "cannot import 'no_such_module_here'.*ModuleNotFoundError"),
        (f"{HERE}:missing", "has no 'missing'"),
        (f"{HERE}:NOT_CALLABLE", "is not callable"),
    ],
)
def test_a_target_that_cannot_be_imported_is_a_config_error(target, message):
    with pytest.raises(ConfigError, match=message):
        import_target(target)


def test_a_method_can_be_a_target():
    assert import_target("datetime:date.fromisoformat")("2024-02-29") == datetime.date(2024, 2, 29)


# -- the sandbox -------------------------------------------------------------------------


def test_a_function_tool_is_offered_with_its_docstring_and_schema(tmp_path):
    box = started_now(
        ToolSandbox(config(tmp_path, add=FunctionTool(target=f"{HERE}:add", tags=("math",))))
    )

    async def main():
        (spec,) = await box.grant("ada", ["add"])
        found = await box.find(tag="math")
        await box.close()
        return spec, found

    spec, found = run(main())
    assert spec.description == "Add two integers."
    assert spec.parameters["required"] == ["a"]
    assert [d.name for d in found if d.source.startswith("function:")] == ["add"]


def test_a_function_tool_runs_with_validated_and_coerced_arguments(tmp_path):
    box = started_now(ToolSandbox(config(tmp_path, add=f"{HERE}:add", describe=f"{HERE}:describe")))

    async def main():
        await granted(box, "add", "describe")
        results = [
            await box.call(call("add", a="40"), agent="ada", job_id="j"),  # "40" -> 40
            await box.call(call("add", a=1, b=2.0), agent="ada", job_id="j"),
            await box.call(call("describe", name="Ada", tags=["1", 2]), agent="ada", job_id="j"),
            await box.call(call("add", a="forty"), agent="ada", job_id="j"),
            await box.call(call("add", a=1, c=3), agent="ada", job_id="j"),
        ]
        await box.close()
        return results

    forty_two, three, described, not_a_number, extra = run(main())
    assert (forty_two.ok, forty_two.data, forty_two.tool) == (True, 42, "add")
    assert three.data == 3
    assert described.data == {
        "name": "Ada", "mood": "calm", "tags": [1, 2], "ratio": 1.0, "loud": False
    }  # fmt: skip
    assert not_a_number.error.code is ErrorCode.INVALID_ARGUMENTS
    assert extra.error.code is ErrorCode.INVALID_ARGUMENTS


def test_arguments_are_converted_to_the_annotated_types_and_results_to_json(tmp_path):
    box = started_now(ToolSandbox(config(tmp_path, weekday=f"{HERE}:weekday")))

    async def main():
        await granted(box, "weekday")
        good = await box.call(call("weekday", day="2024-02-29"), agent="ada", job_id="j")
        bad = await box.call(call("weekday", day="2024-02-30"), agent="ada", job_id="j")
        await box.close()
        return good, bad

    good, bad = run(main())
    assert good.data == {"weekday": 4, "iso": "2024-02-29"}  # a date in, a dataclass out
    assert not bad.ok
    assert bad.error.code is ErrorCode.TOOL
    assert "invalid arguments for 'weekday': day:" in bad.error.message


def test_a_given_schema_replaces_the_signature_and_values_pass_as_json(tmp_path):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 5}},
        "required": ["name"],
    }
    tool = FunctionTool(target=f"{HERE}:greet", parameters=schema, description="Say hello.")
    box = started_now(ToolSandbox(config(tmp_path, greet=tool)))

    async def main():
        spec = (await box.grant("ada", ["greet"]))[0]
        ok = await box.call(call("greet", name="Ada"), agent="ada", job_id="j")
        too_long = await box.call(call("greet", name="Adelaide"), agent="ada", job_id="j")
        await box.close()
        return spec, ok, too_long

    spec, ok, too_long = run(main())
    assert (spec.description, spec.parameters) == ("Say hello.", schema)
    assert ok.data == "hello Ada"  # an async function, awaited on the loop
    assert too_long.error.code is ErrorCode.INVALID_ARGUMENTS


def test_failures_come_back_as_results_the_model_reads(tmp_path):
    box = started_now(
        ToolSandbox(config(tmp_path, explode=f"{HERE}:explode", refuse=f"{HERE}:refuse"))
    )

    async def main():
        await granted(box, "explode", "refuse")
        crashed = await box.call(call("explode", message="boom"), agent="ada", job_id="j")
        refused = await box.call(call("refuse", reason="no"), agent="ada", job_id="j")
        await box.close()
        return crashed, refused

    crashed, refused = run(main())
    assert not crashed.ok
    assert crashed.error.message == "explode failed: ValueError: boom"
    assert refused.error.message == "cannot do that: no"
    assert refused.error.detail["reason"] == "no"


def test_the_sandbox_keeps_serving_while_a_function_runs_in_a_worker_thread(tmp_path):
    GATE.clear()
    ENTERED.clear()
    box = started_now(ToolSandbox(config(tmp_path, blocked=f"{HERE}:blocked", add=f"{HERE}:add")))

    async def main():
        await granted(box, "blocked", "add", "calculator")
        slow = asyncio.create_task(box.call(call("blocked", label="x"), agent="ada", job_id="j"))
        await asyncio.to_thread(ENTERED.wait, 10)
        meanwhile = [
            await box.call(call("calculator", expression="6*7"), agent="ada", job_id="j"),
            await box.call(call("add", a=1), agent="ada", job_id="j"),  # another worker
        ]
        still_running = not slow.done()
        GATE.set()
        done = await slow
        await box.close()
        return meanwhile, still_running, done

    meanwhile, still_running, done = run(main())
    assert [r.data for r in meanwhile] == [42, 3]
    assert still_running
    assert done.data.startswith("x done in tool-function")


def test_a_function_past_its_timeout_is_reported_and_its_worker_freed_when_it_returns(tmp_path):
    GATE.clear()
    ENTERED.clear()
    tool = FunctionTool(target=f"{HERE}:blocked", timeout_s=0.2)
    box = started_now(ToolSandbox(config(tmp_path, blocked=tool)))

    async def main():
        await granted(box, "blocked")
        late = await box.call(call("blocked", label="late"), agent="ada", job_id="j")
        GATE.set()  # the thread cannot be stopped: it finishes, and its worker serves again
        again = await box.call(call("blocked", label="again"), agent="ada", job_id="j")
        await box.close()
        return late, again

    late, again = run(main())
    assert not late.ok
    assert late.error.message == "blocked timed out after 0.2 s"
    assert again.data.startswith("again done")


def test_a_function_that_cannot_load_is_left_out_and_granting_it_says_why(tmp_path):
    box = started_now(ToolSandbox(
        config(tmp_path, add=f"{HERE}:add", ghost="no_such_module_here:f",
               quiet=f"{HERE}:undocumented", many=f"{HERE}:variadic")
    ))  # fmt: skip

    async def main():
        await granted(box, "add")
        ok = await box.call(call("add", a=1), agent="ada", job_id="j")
        errors = []
        for tool in ("ghost", "quiet", "many"):
            with pytest.raises(ConfigError) as caught:
                await box.grant("ada", ["add", tool])
            errors.append(caught.value.message)
        await box.close()
        return ok, errors

    ok, (ghost, quiet, many) = run(main())
    assert ok.data == 3
    assert "unknown tool(s) ['ghost']" in ghost
    assert "cannot import 'no_such_module_here'" in ghost
    assert "has no docstring; give a description" in quiet
    assert "cannot be passed by keyword" in many


def test_regranting_the_same_tools_changes_nothing_and_a_change_persists(tmp_path):
    cfg = config(tmp_path, add=f"{HERE}:add")

    async def main():
        first = await started(ToolSandbox(cfg))
        await first.grant("ada", ["add", "calculator"])
        await first.grant("ada", ["calculator", "add"])  # the same grant, in another order
        await first.grant("bob", ["add"])
        await first.grant("bob", ["calculator"])
        await first.close()
        second = await started(ToolSandbox(cfg))
        results = [
            await second.call(call("add", a=1), agent="ada", job_id="j"),
            await second.call(call("add", a=1), agent="bob", job_id="j"),
        ]
        await second.close()
        return results

    ada, bob = run(main())
    assert ada.data == 3
    assert bob.error.code is ErrorCode.TOOL_NOT_ALLOWED


# -- a job -------------------------------------------------------------------------------


def test_agents_call_a_function_tool_through_the_router_in_a_job(tmp_path):
    async def main():
        router = MessageRouter()
        client = LocalRouterClient(router)
        pool = LLMAdapterPool()
        llm = Tap(pool)
        sandbox = await started(ToolSandbox(config(tmp_path, add=f"{HERE}:add"), router=client))
        await router.register("llm-0", llm, ["llm"])
        await router.register("tools-0", sandbox, ["tools"])
        desk, (orchestrator,) = await control_plane(
            client, InProcessProvisioner(router, pool, client, sandbox=sandbox)
        )
        await router.register("orchestrator", orchestrator)
        agents, models, plan = [], {}, []
        for i in range(3):
            add_call = ToolCall(call_id=f"c{i}", tool="add", arguments={"a": i, "b": 10})
            models[f"m{i}"] = ScriptedModel(
                turns=(ScriptedTurn(tool_calls=(add_call,)), ScriptedTurn(text=f"sum {i} done"))
            )
            agents.append(AgentSpec(name=f"adder-{i}", role=f"r{i}", model=f"m{i}", tools=("add",)))
            plan.append(PlannedSubtask(id=f"s{i}", role=f"r{i}", instructions=f"Add {i}."))
        team = TeamSpec(name="adders", agents=tuple(agents), models=models,
                        planner_model="offline", plan=tuple(plan))  # fmt: skip
        result = await orchestrator.wait(await desk.submit(*order("Add.", team)), 10)
        await sandbox.close()
        told = [r.messages[-1] for r in llm.payloads(LLMRequest) if r.messages[-1].role == "tool"]
        return result, told

    result, told = run(main())
    assert result.status == "succeeded"
    assert [(s.tool_calls, s.output) for s in result.subtasks] == [
        (1, "sum 0 done"), (1, "sum 1 done"), (1, "sum 2 done")
    ]  # fmt: skip
    assert sorted(m.content for m in told) == ["10", "11", "12"]  # what each model was told


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["1", 2], [1, 2]),  # list[int] | None: the slip is fixed inside the list branch
        ("7", "7"),  # valid for the string branch as it is: unchanged
        ("null", None),
        ("x", "x"),  # valid for no branch, even converted: left for validation to report
    ],
)
def test_coercion_looks_into_the_alternatives_of_an_optional(value, expected):
    schema = {
        "anyOf": [
            {"type": "array", "items": {"type": "integer"}},
            {"type": "string", "maxLength": 1},
            {"type": "null"},
        ]
    }
    assert coerce(value, schema) == expected
