"""Errors as problem details, and OpenAI chat messages read as a job's task and images."""

import base64
import json

import pytest

from raytroupe.deployments.openai_messages import _task
from raytroupe.deployments.problems import PROBLEM_TYPE, problem, status_of, troupe_problem
from raytroupe.protocols import (
    AgentNotFound,
    Attachment,
    BudgetExceeded,
    Busy,
    ConfigError,
    Conflict,
    DeadlineExceeded,
    ExperimentNotFound,
    InvalidInput,
    JobFailed,
    JobNotFound,
    JobTimeout,
    MalformedEnvelope,
    PlanError,
    ProviderUnavailable,
    RecipientUnavailable,
    TeamNotFound,
    ToolError,
    ToolNotAllowed,
    TroupeError,
    UnknownRecipient,
    WorkLimitExceeded,
)
from raytroupe.protocols.job_context import History, Turn

# problems


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InvalidInput("bad"), 422),
        (MalformedEnvelope("bad bytes"), 400),
        (ConfigError("bad team"), 422),
        (TeamNotFound("no team"), 404),
        (AgentNotFound("no agent"), 404),
        (ExperimentNotFound("no experiment"), 404),
        (JobNotFound("no job"), 404),
        (Conflict("taken"), 409),
        (BudgetExceeded("spent"), 402),
        (PlanError("no plan"), 422),
        (ToolNotAllowed("not yours"), 403),
        (RecipientUnavailable("restarting"), 503),
        (UnknownRecipient("who?"), 503),
        (JobTimeout("slow"), 504),
        (ProviderUnavailable("down"), 503),
        (DeadlineExceeded("late"), 503),
        (ToolError("tool broke"), 500),
        (JobFailed("failed"), 500),
        (TroupeError("unknown"), 500),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_status_of_each_error(error, status):
    assert status_of(error) == status


def test_unmapped_errors_are_503_when_retryable_and_500_when_not():
    class Flaky(TroupeError):
        retryable = True

    assert status_of(Flaky("try again")) == 503
    assert status_of(TroupeError("broken")) == 500


def _body(response):
    return json.loads(response.body)


def test_a_troupe_problem_carries_the_errors_message_code_and_retryability():
    response = troupe_problem(JobNotFound("no job 'j9'", job_id="j9"), "req-1")
    assert response.status_code == 404
    assert response.media_type == PROBLEM_TYPE
    assert response.headers["content-type"] == PROBLEM_TYPE
    assert _body(response) == {
        "type": "https://raytroupe.dev/problems/job_not_found",
        "title": "JobNotFound",
        "status": 404,
        "detail": "no job 'j9'",
        "code": "job_not_found",
        "retryable": False,
        "error": {
            "message": "no job 'j9'",
            "type": "job_not_found",
            "code": "job_not_found",
            "param": None,
        },
        "request_id": "req-1",
    }


def test_a_retryable_troupe_problem_says_so():
    body = _body(troupe_problem(RecipientUnavailable("agent restarting"), None))
    assert (body["status"], body["retryable"], body["code"]) == (
        503,
        True,
        "recipient_unavailable",
    )
    assert "request_id" not in body


def test_a_troupe_problem_lists_a_config_errors_problems():
    error = ConfigError("invalid team", problems=["agents: too short", 3])
    body = _body(troupe_problem(error, "r"))
    assert body["status"] == 422
    assert body["problems"] == ["agents: too short", "3"]
    assert "problems" not in _body(troupe_problem(ConfigError("x", problems="not a list"), "r"))


def test_a_troupe_problem_keeps_other_detail_out_of_the_body():
    body = _body(troupe_problem(Conflict("taken", agents=["ada"], table="t_internal"), "r"))
    assert "agents" not in body
    assert "t_internal" not in json.dumps(body)


def test_problem_takes_headers_and_extra_members():
    response = problem(
        429, "Too Many Requests", "slow down", code="rate_limited", headers={"Retry-After": "7"},
        retry_after_s=7,
    )  # fmt: skip
    assert response.headers["retry-after"] == "7"
    body = _body(response)
    assert body["retry_after_s"] == 7
    assert body["error"] == {
        "message": "slow down",
        "type": "rate_limited",
        "code": "rate_limited",
        "param": None,
    }
    assert "request_id" not in body


# OpenAI messages


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


def test_a_single_user_message_is_the_task():
    assert _task([{"role": "user", "content": "  Summarize Ray.  "}]) == (
        "Summarize Ray.",
        History(),
        [],
    )


def test_the_last_user_message_is_the_task_and_earlier_turns_its_history():
    task, history, images = _task(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is Ray?"},
            {"role": "assistant", "content": "A framework."},
            {"role": "user", "content": "And Serve?"},
        ]
    )
    assert task == "And Serve?"
    assert history.turns == (
        Turn(role="system", text="Be brief."),
        Turn(role="user", text="What is Ray?"),
        Turn(role="assistant", text="A framework."),
    )
    assert images == []
    # in a session, the session has the conversation: only the instructions are given
    _, kept, _ = _task([{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "What is Ray?"},
                        {"role": "user", "content": "And Serve?"}], in_session=True)  # fmt: skip
    assert kept.turns == (Turn(role="system", text="Be brief."),)


def test_empty_turns_are_left_out_of_the_history():
    task, history, _ = _task(
        [
            {"role": "developer", "content": "Use metric units."},
            {"role": "assistant", "content": None},
            {"role": "tool", "content": ""},
            {"role": "user", "content": "How far?"},
        ]
    )
    assert task == "How far?"
    assert history.turns == (Turn(role="developer", text="Use metric units."),)


def test_content_parts_give_text_and_images():
    task, _, images = _task(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                    {"type": "text", "text": "these pictures?"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                ],
            }
        ]
    )
    assert task == "What is in\nthese pictures?"
    assert images == [
        Attachment(name="image-1", media_type="image/png", data_b64=PNG),
        Attachment(name="image-2", media_type="image/png", url="https://example.com/cat.jpg"),
    ]


def test_a_data_url_keeps_its_media_type_and_an_image_url_may_be_a_bare_string():
    jpeg = base64.b64encode(b"\xff\xd8\xff").decode()
    _, _, images = _task(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": f"data:image/jpeg;base64,{jpeg}"},
                    {"type": "image_url", "image_url": "http://example.com/a.png"},
                    {"type": "text", "text": "Compare."},
                ],
            }
        ]
    )
    assert [(i.name, i.media_type, i.data_b64, i.url) for i in images] == [
        ("image-1", "image/jpeg", jpeg, None),
        ("image-2", "image/png", None, "http://example.com/a.png"),
    ]


def test_images_of_earlier_turns_are_given_too():
    _, _, images = _task(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Here is a chart."},
                    {"type": "image_url", "image_url": {"url": "https://example.com/c.png"}},
                ],
            },
            {"role": "assistant", "content": "I see it."},
            {"role": "user", "content": "What does it show?"},
        ]
    )
    assert [i.url for i in images] == ["https://example.com/c.png"]


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([{"role": "system", "content": "Be brief."}], "no user message"),
        ([{"role": "assistant", "content": "hi"}, {"role": "tool", "content": "x"}], "no user"),
        ([{"role": "user", "content": "   "}], r"messages\[0\]: the last user message is empty"),
        ([{"role": "robot", "content": "beep"}], r"messages\[0\]: unknown role 'robot'"),
        ([{"content": "who am I"}], "unknown role None"),
        (
            [{"role": "user", "content": "hi"}, {"role": "user", "content": {"text": "x"}}],
            r"messages\[1\]\.content must be a string or a list of parts",
        ),
        (
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
            "unsupported content part 'input_audio'",
        ),
        ([{"role": "user", "content": ["just a string"]}], "unsupported content part None"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
            "image_url needs a url",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}
                    ],
                }
            ],
            "unusable image",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "ftp://example.com/a.png"}}
                    ],
                }
            ],
            "unusable image",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image_url",
                            "image_url": {"url": f"data:image/tiff;base64,{PNG}"},
                        }
                    ],
                }
            ],
            "unusable image",
        ),
    ],
    ids=[
        "only-system",
        "no-user",
        "empty-user",
        "unknown-role",
        "no-role",
        "content-dict",
        "audio-part",
        "part-not-a-dict",
        "image-without-url",
        "bad-base64",
        "ftp-url",
        "unsupported-image-type",
    ],
)
def test_unusable_messages_are_invalid_input(messages, match):
    with pytest.raises(InvalidInput, match=match):
        _task(messages)


def test_a_problem_quoting_any_text_renders_and_a_busy_tenant_is_told_when_to_come_back():
    quoted = troupe_problem(InvalidInput("no such field 'a\ud800b' ü"), "req-1")
    body = json.loads(quoted.body)  # a lone surrogate renders escaped, never a 500
    assert body["detail"] == "no such field 'a\ud800b' ü"
    busy = troupe_problem(Busy("wait", limit="shares.waiting", retry_after_s=0.2), "req-2")
    assert busy.status_code == 429
    assert busy.headers["retry-after"] == "1"
    assert json.loads(busy.body)["limit"] == "shares.waiting"
    assert json.loads(busy.body)["retry_after_s"] == 1
    work = troupe_problem(WorkLimitExceeded("slow", limit="request_work_s", seconds=0.5), None)
    assert work.status_code == 422
    assert json.loads(work.body)["code"] == "work_limit"
