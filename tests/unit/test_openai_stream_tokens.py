"""Which of a job's streamed tokens a streamed chat completion sends as the answer, and when
the orchestrator streams its aggregation at all."""

import time

import pytest

from raytroupe.actors.orchestrator.jobs import Job
from raytroupe.actors.orchestrator.runner import streams_answer
from raytroupe.deployments.openai_answers import _AnswerTokens
from raytroupe.protocols import AgentSpec, JobEvent, TeamSpec, orchestrator_address
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.skill import SkillSpec

JOB = "job-stream-1"
ME = orchestrator_address(JOB)


def _events(*steps):
    """Events of ``JOB`` in order: a type, or (agent, texts) for an ``llm_delta``."""
    events = []
    for seq, step in enumerate(steps, start=1):
        kind, data = step, {}
        if isinstance(step, tuple):
            agent, texts = step
            kind, data = "llm_delta", {"agent": agent, "deltas": [{"text": t} for t in texts]}
        events.append(JobEvent(job_id=JOB, seq=seq, at=1.0, type=kind, data=data))
    return events


def _taken(tokens, events):
    return [text for event in events for text in tokens.take(event)]


def test_only_the_aggregations_tokens_are_the_answer():
    tokens = _AnswerTokens(JOB)
    events = _events(
        "plan_ready",
        ("writer", ["The agent's ", "draft"]),  # a subtask's work
        (ME, ["not yet aggregating"]),  # (the orchestrator streams nothing else; still)
        "job_aggregating",
        ("writer", ["late work"]),
        (ME, ["Ray ", "actors"]),
        (ME, [" keep state."]),
        "job_succeeded",
    )
    assert _taken(tokens, events) == ["Ray ", "actors", " keep state."]
    assert tokens.rest("Ray actors keep state.") == ""


def test_leading_whitespace_waits_for_text_and_a_blank_aggregation_sends_the_whole_answer():
    held = _AnswerTokens(JOB)
    assert _taken(held, _events("job_aggregating", (ME, ["\n", " "]), (ME, ["Yes."]))) == [
        "\n Yes."
    ]
    blank = _AnswerTokens(JOB)  # its answer became the subtasks' outputs, joined
    assert _taken(blank, _events("job_aggregating", (ME, ["  ", "\n"]), "job_succeeded")) == []
    assert blank.rest("- s1: one\n- s2: two") == "- s1: one\n- s2: two"


def test_what_is_left_of_the_answer_and_an_answer_that_is_not_what_streamed():
    tokens = _AnswerTokens(JOB)
    _taken(tokens, _events("job_aggregating", (ME, ["Ray actors"])))
    assert tokens.rest("Ray actors keep state.") == " keep state."
    assert tokens.rest("Something else.") is None


def test_tool_call_fragments_are_not_text():
    tokens = _AnswerTokens(JOB)
    event = JobEvent(
        job_id=JOB, seq=2, at=1.0, type="llm_delta",
        data={"agent": ME, "deltas": [{"text": "", "tool_call_index": 0, "arguments": "{"},
                                      {"text": "ok"}, "junk", {"text": 3}]},
    )  # fmt: skip
    assert _taken(tokens, [*_events("job_aggregating"), event]) == ["ok"]


def _job(*, stream_answer=True, skill=None, **team):
    spec = TeamSpec(name="t", agents=[AgentSpec(name="a", role="worker")], **team)
    return Job(
        id=JOB,
        context=JobContext(request="x"),
        team=spec,
        tenant="acme",
        submitted_at=time.time(),
        stream_answer=stream_answer,
        skill=skill,
    )


SKILL = SkillSpec(name="s", version="1", description="d", prompt={"instructions": "x"})


@pytest.mark.parametrize(
    ("job", "streamed"),
    [
        (_job(), True),
        (_job(stream_answer=False), False),  # nobody reads it as it comes
        (_job(output_schema={"type": "object"}), False),  # may be sent back and redone
        (_job(required=("answer",)), False),
        (_job(skill=SKILL), False),  # its gate may have it revised
    ],
)
def test_the_aggregation_streams_only_when_asked_and_its_text_is_the_answer(job, streamed):
    assert streams_answer(job) is streamed
