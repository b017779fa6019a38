"""A remote A2A agent as a team's tool on a real Ray: the session's ``a2a_shouter``.

The agent is the SDK's server on 127.0.0.1 (``a2a_agent``, tests/conftest.py), which the
session's tools policy allows; the team's agent plays a scripted model that calls it once.
"""

from __future__ import annotations

import itertools

import pytest

from raytroupe.protocols import (
    AgentSpec,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
    ToolCall,
)

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

_ids = itertools.count()


def _team(message: str) -> TeamSpec:
    n = next(_ids)
    call = ToolCall(call_id="c1", tool="a2a_shouter", arguments={"message": message})
    model = ScriptedModel(turns=(ScriptedTurn(tool_calls=(call,)), ScriptedTurn(text="Relayed.")))
    return TeamSpec(
        name=f"a2a-relay-{n}",
        planner_model="offline",
        models={f"a2a-m-{n}": model},
        plan=(PlannedSubtask(id="s1", role="relay", instructions="Ask the shouter."),),
        agents=(
            AgentSpec(name=f"a2a-relay-{n}", role="relay", model=f"a2a-m-{n}",
                      tools=("a2a_shouter",)),
        ),
    )  # fmt: skip


def test_a_teams_agent_asks_the_remote_a2a_agent_once_and_sees_its_answer(rt, a2a_agent):
    before = len(a2a_agent.seen.messages)
    result = rt.submit("Relay a greeting.", _team("greetings from ray")).result(timeout=120)

    (sub,) = result.subtasks
    assert sub.status == "succeeded"
    assert sub.tool_calls == 1
    assert a2a_agent.seen.messages[before:] == ["greetings from ray"]
    [span] = [s for s in result.trace if s.kind == "tool_call"]
    assert span.attributes["tool"] == "a2a_shouter"
    assert span.attributes["ok"] is True
    assert '"text": "GREETINGS FROM RAY"' in str(span.attributes["result"])
    assert '"state": "completed"' in str(span.attributes["result"])


def test_a_remote_failure_reaches_the_model_as_a_tool_error(rt, a2a_agent):
    before = len(a2a_agent.seen.messages)
    result = rt.submit("Relay a failure.", _team("fail the printer is out of toner")).result(
        timeout=120
    )

    (sub,) = result.subtasks
    assert a2a_agent.seen.messages[before:] == ["fail the printer is out of toner"]
    [span] = [s for s in result.trace if s.kind == "tool_call"]
    assert span.attributes["ok"] is False
    assert span.attributes["error_code"] == "tool"
    assert "ended failed" in str(span.attributes["result"])
    assert "the printer is out of toner" in str(span.attributes["result"])
    assert sub.status == "succeeded"  # the model was told, and answered
