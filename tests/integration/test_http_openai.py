"""The official ``openai`` client talks to a team through /v1/chat/completions."""

from __future__ import annotations

import base64

import openai
import pytest

from raytroupe import runtime
from tests.support.http_api import ADMIN_KEY, BLUE_KEY, USER_KEY
from tests.support.wire_server import Default, WireServer

TEAM = "http-openai"


@pytest.fixture(scope="module")
def team(api):
    spec = runtime.Team(
        name=TEAM,
        agents=[runtime.AgentSpec(name=f"{TEAM}-{n}", role="worker") for n in range(2)],
    ).spec()
    with api.client(ADMIN_KEY) as admin:
        response = admin.put(f"/v1/teams/{TEAM}", json=spec.model_dump(mode="json"))
        assert response.status_code in {200, 201}, response.text
    return TEAM


def _client(api, key=USER_KEY):
    return openai.OpenAI(base_url=f"{api.url}/v1", api_key=key, max_retries=0, timeout=60)


def test_models_lists_the_registered_teams(api, team):
    models = _client(api).models.list()
    assert team in [m.id for m in models.data]


def test_one_model_is_read_back_and_an_unknown_or_hidden_one_is_not_found(api, team):
    card = _client(api).models.retrieve(team)
    assert (card.id, card.object, card.owned_by) == (team, "model", "raytroupe")
    assert _client(api).models.retrieve("auto").id == "auto"
    with pytest.raises(openai.NotFoundError) as missing:
        _client(api).models.retrieve("no-such-team")
    with pytest.raises(openai.NotFoundError):  # a team its policy does not let it run
        _client(api, key=BLUE_KEY).models.retrieve(team)
    assert "no-such-team" in missing.value.message


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"functions": [{"name": "pay", "parameters": {}}]}, "functions"),
        ({"function_call": "auto"}, "function_call"),
        ({"n": 3}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"response_format": {"type": "xml"}}, "response_format"),
        ({"response_format": {"type": ["json_object"]}}, "response_format"),
    ],
)  # fmt: skip
def test_a_field_the_team_cannot_honour_is_a_400_naming_it_and_starts_nothing(
    api, team, rt, extra, field
):
    before = set(rt.jobs())
    with pytest.raises(openai.BadRequestError) as refused:
        _client(api).chat.completions.create(
            model=team, messages=[{"role": "user", "content": "hi"}], **extra
        )
    assert refused.value.status_code == 400
    assert refused.value.code == "unsupported_parameter"
    assert refused.value.param == field  # OpenAI's error object names the parameter
    assert repr(field) in refused.value.message
    assert set(rt.jobs()) == before  # nothing was started


def test_sampling_fields_are_left_to_the_team(api, team):
    completion = _client(api).chat.completions.create(
        model=team, messages=[{"role": "user", "content": "- one."}], temperature=0.2,
        max_tokens=50, seed=7, n=1, response_format={"type": "text"},
    )  # fmt: skip
    assert completion.choices[0].message.content


def test_a_chat_completion_runs_a_job_of_the_team(api, team, rt):
    client = _client(api)
    completion = client.chat.completions.create(
        model=team,
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Tasks:\n- Explain Ray actors\n- Explain Ray tasks"},
        ],
    )
    (choice,) = completion.choices
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert "Ray actors" in choice.message.content
    assert "Ray tasks" in choice.message.content
    job_id = completion.id.removeprefix("chatcmpl-")
    result = rt.job(job_id).result(timeout=5)  # the same job, seen from a driver
    assert result.answer == choice.message.content
    assert completion.usage.total_tokens == result.usage.total_tokens > 0
    assert len(result.subtasks) == 2


def test_a_streamed_chat_completion_arrives_in_chunks_with_usage(api, team):
    stream = _client(api).chat.completions.create(
        model=team,
        messages=[{"role": "user", "content": "Explain:\n- Serve proxies\n- Serve replicas"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert finishes[-1] == "stop"
    assert "Serve proxies" in text
    assert "Serve replicas" in text
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) >= 2
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0


def test_errors_reach_openai_clients_as_typed_exceptions(api, team):
    with pytest.raises(openai.AuthenticationError) as denied:
        _client(api, key="rt-wrong").chat.completions.create(
            model=team, messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.NotFoundError) as missing:
        _client(api).chat.completions.create(
            model="no-such-team", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.UnprocessableEntityError) as no_user:
        _client(api).chat.completions.create(
            model=team, messages=[{"role": "system", "content": "only a system turn"}]
        )
    assert "API key" in denied.value.message
    assert "no-such-team" in missing.value.message
    assert "no user message" in no_user.value.message


def test_an_image_in_a_chat_reaches_the_agent(api):
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n pixels").decode()
    with WireServer() as wire:
        wire.script(Default())
        model = runtime.OpenAICompatibleModel(base_url=wire.base_url_openai, model="wire-eye")
        spec = runtime.Team(
            name="http-openai-eye",
            planner_model="offline",
            models={"eye": model},
            agents=[runtime.AgentSpec(name="http-openai-eye-1", role="worker", model="eye")],
        ).spec()
        with api.client(ADMIN_KEY) as admin:
            admin.put("/v1/teams/http-openai-eye", json=spec.model_dump(mode="json"))
        completion = _client(api).chat.completions.create(
            model="http-openai-eye",
            messages=[{"role": "user", "content": [
                {"type": "text", "text": "What is in the picture?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
            ]}],
        )  # fmt: skip
        opening = wire.requests[0].body["messages"][1]["content"]
    assert completion.choices[0].message.content
    urls = [p["image_url"]["url"] for p in opening if p["type"] == "image_url"]
    assert urls == [f"data:image/png;base64,{png}"]
