"""Streamed chat completions through the official ``openai`` client: the answer's tokens arrive
while the job runs, and nothing but the answer is content.

The team's aggregation (its answer) is a wire model that streams word by word and holds the
rest of its stream after the first words until the test has looked (no timing bound); its one
agent streams its own tokens too (offline), which must not show up as content.
"""

from __future__ import annotations

import json
import threading

import openai
import pytest

from raytroupe import runtime
from raytroupe.protocols import PlannedSubtask, orchestrator_address
from tests.support.http_api import BLUE_KEY, OTHER_KEY, SKILL_KEY, USER_KEY, finished, register
from tests.support.wire_server import Hold, Reply, StreamError, WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

TEAM = "http-openai-stream"
PLANNER = f"{TEAM}-aggregator"
WORKER = f"{TEAM}-worker"
ANSWER = "Ray actors keep state between calls; Ray tasks are stateless. Both scale out."
ASK = [{"role": "user", "content": "Compare Ray actors and Ray tasks."}]


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


@pytest.fixture(scope="module")
def team(api, wire):
    aggregator = runtime.OpenAICompatibleModel(base_url=wire.base_url_openai, model="wire-agg")
    return register(
        api,
        runtime.Team(
            name=TEAM,
            planner_model=PLANNER,  # with a declared plan, it only aggregates
            models={PLANNER: aggregator},
            plan=[PlannedSubtask(id="draft", role="worker", instructions="{task}")],
            agents=[runtime.AgentSpec(name=WORKER, role="worker", model="offline", stream=True)],
        ),
    )


@pytest.fixture
def aggregator(wire):
    wire.reset()
    return wire


def _client(api, key=USER_KEY):
    return openai.OpenAI(base_url=f"{api.url}/v1", api_key=key, max_retries=0, timeout=60)


def _content(chunk) -> str:
    return (chunk.choices[0].delta.content or "") if chunk.choices else ""


def _status(api, completion_id: str) -> str:
    with api.client(USER_KEY) as http:
        return http.get(f"/v1/jobs/{completion_id.removeprefix('chatcmpl-')}").json()["status"]


def _finished(api, completion_id: str) -> dict:
    with api.client(USER_KEY) as http:
        return finished(http, completion_id.removeprefix("chatcmpl-"))


def test_the_answer_streams_token_by_token_while_the_job_runs(api, team, aggregator, rt):
    release = threading.Event()
    aggregator.script(Hold(after_chunks=3, release=release, then=Reply(text=ANSWER)))
    chunks, status_at_first = [], None
    try:
        stream = _client(api).chat.completions.create(
            model=team, messages=ASK, stream=True, stream_options={"include_usage": True}
        )
        for chunk in stream:
            chunks.append(chunk)
            if status_at_first is None and _content(chunk):
                status_at_first = _status(api, chunk.id)  # the model holds its other words
                release.set()
    finally:
        release.set()
    view = _finished(api, chunks[0].id)
    text = "".join(_content(c) for c in chunks)

    assert status_at_first == "aggregating"  # the first token came before the job's end
    assert len([c for c in chunks if _content(c)]) > 1
    assert text == ANSWER == view["result"]["answer"]
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    assert finishes[:-1] == [None] * (len(finishes) - 1)
    assert chunks[-1].choices == []
    usage = view["result"]["usage"]
    assert chunks[-1].usage.prompt_tokens == usage["prompt_tokens"] > 0
    assert chunks[-1].usage.completion_tokens == usage["completion_tokens"] > 0
    assert aggregator.requests[0].body["stream"] is True

    # the agent streamed its own tokens as job events: work, not the answer
    job_id = chunks[0].id.removeprefix("chatcmpl-")
    events = list(rt.job(job_id).events(timeout=10))
    sources = {e.data["agent"] for e in events if e.type == "llm_delta"}
    assert sources == {WORKER, orchestrator_address(job_id)}
    (draft,) = view["result"]["subtasks"]
    assert draft["output"]
    assert draft["output"] not in text

    aggregator.script(Reply(text=ANSWER))  # the same answer, not streamed
    completion = _client(api).chat.completions.create(model=team, messages=ASK)
    assert completion.choices[0].message.content == text
    assert not aggregator.requests[1].body.get("stream")  # nobody streams: nothing streamed


def test_an_answer_shaped_as_json_is_sent_whole_once_the_job_has_it(api, team, aggregator):
    aggregator.script(Reply(text=ANSWER))
    stream = _client(api).chat.completions.create(
        model=team, messages=ASK, stream=True, response_format={"type": "json_object"}
    )
    chunks = list(stream)
    view = _finished(api, chunks[0].id)
    text = "".join(_content(c) for c in chunks)

    assert json.loads(text) == view["result"]["output"]
    assert view["result"]["output"]["text"] == ANSWER
    assert not aggregator.requests[0].body.get("stream")  # its tokens are not the content


def test_a_failure_after_the_first_tokens_is_reported_in_the_stream(api, team, aggregator):
    aggregator.script(
        StreamError(after_chunks=3, message="the model fell over", then=Reply(text=ANSWER))
    )
    stream = _client(api).chat.completions.create(model=team, messages=ASK, stream=True)
    chunks = []
    with pytest.raises(openai.APIError) as broken:
        chunks.extend(stream)  # what came before the error event is kept
    view = _finished(api, chunks[0].id)
    text = "".join(_content(c) for c in chunks)

    assert view["status"] == "failed"
    assert text  # the tokens before the failure came as they were written
    assert ANSWER.startswith(text)
    assert text != ANSWER
    assert view["id"] in broken.value.message
    assert "failed" in broken.value.message
    assert not [c for c in chunks if c.choices and c.choices[0].finish_reason]


def test_a_client_that_disconnects_stops_its_stream_and_the_job_still_ends(api, team, aggregator):
    release = threading.Event()
    aggregator.script(Hold(after_chunks=3, release=release, then=Reply(text=ANSWER)))
    try:
        stream = _client(api).chat.completions.create(model=team, messages=ASK, stream=True)
        first = next(c for c in stream if _content(c))
        stream.close()
    finally:
        release.set()
    view = _finished(api, first.id)

    assert ANSWER.startswith(_content(first))
    assert view["status"] == "succeeded"
    assert view["result"]["answer"] == ANSWER


@pytest.mark.parametrize(
    ("key", "model", "status"),
    [
        (BLUE_KEY, TEAM, 403),  # its tenant's policy names other teams
        (SKILL_KEY, TEAM, 403),  # its tenant's policy names no team
        (OTHER_KEY, "no-such-team", 404),
        (OTHER_KEY, "skill:no-such-skill", 404),
    ],
)
@pytest.mark.usefixtures("team")
def test_a_model_the_key_may_not_run_is_refused_alike_streamed_or_not(api, rt, key, model, status):
    before = set(rt.jobs())
    refusals = []
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as refused:
            _client(api, key).chat.completions.create(model=model, messages=ASK, stream=stream)
        error = refused.value
        refusals.append((type(error), error.status_code, error.code, error.message))
    assert refusals[0] == refusals[1]
    assert refusals[0][1] == status
    assert set(rt.jobs()) == before  # nothing was started


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"stream": True, "functions": [{"name": "f"}]}, "functions"),
        ({"stream": True, "n": 2}, "n"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),  # without stream
        ({"stream": True, "stream_options": {"include_usage": "yes"}}, "stream_options"),
    ],
)
def test_a_malformed_stream_request_is_a_400_naming_the_field(api, team, rt, extra, field):
    before = set(rt.jobs())
    with pytest.raises(openai.BadRequestError) as refused:
        _client(api).chat.completions.create(model=team, messages=ASK, **extra)
    assert refused.value.status_code == 400
    assert refused.value.code == "unsupported_parameter"
    assert refused.value.param == field
    assert set(rt.jobs()) == before
