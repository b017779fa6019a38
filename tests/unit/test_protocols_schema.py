import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from jsonschema import Draft202012Validator

from raytroupe.protocols import (
    AgentMessage,
    DeadLetter,
    ErrorCode,
    Event,
    JobEvent,
    JobResult,
    Plan,
    TeamSpec,
    Timings,
)
from raytroupe.protocols.schema import PUBLIC_MODELS

ROOT = Path(__file__).resolve().parents[2]
KINDS = [
    "task_request",
    "task_result",
    "llm_request",
    "llm_response",
    "tool_call",
    "tool_result",
    "event",
    "error",
]


def run_module(*args, cwd):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("schemas") / "nested" / "dir"
    result = run_module(
        "-m", "raytroupe.protocols.schema", str(out), cwd=tmp_path_factory.getbasetemp()
    )
    assert result.returncode == 0, result.stderr
    return out, result


def load(out, name):
    return json.loads((out / f"{name}.json").read_text(encoding="utf-8"))


def validator(out, name):
    return Draft202012Validator(load(out, name), format_checker=Draft202012Validator.FORMAT_CHECKER)


def test_public_models_are_the_documented_set():
    assert {m.__name__ for m in PUBLIC_MODELS} == {
        "AgentMessage",
        "TaskRequest",
        "TaskResult",
        "LLMRequest",
        "LLMResponse",
        "ToolCall",
        "ToolResult",
        "Event",
        "ErrorPayload",
        "TeamSpec",
        "Plan",
        "SkillSpec",
        "StandardOutput",
        "JobResult",
        "JobEvent",
        "GraphCheckpoint",
        "GraphInterrupt",
        "DeadLetter",
        "MemoryWrite",
        "MemoryQuery",
        "MemoryHits",
    }
    assert len({m.__name__ for m in PUBLIC_MODELS}) == len(PUBLIC_MODELS)


def test_cli_writes_one_file_per_public_model(exported):
    out, result = exported
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{m.__name__}.json" for m in PUBLIC_MODELS
    )
    printed = result.stdout.split()
    assert sorted(Path(p).name for p in printed) == sorted(
        f"{m.__name__}.json" for m in PUBLIC_MODELS
    )
    assert all(Path(p).exists() for p in printed)


@pytest.mark.parametrize("model", PUBLIC_MODELS, ids=lambda m: m.__name__)
def test_each_file_is_a_valid_json_schema(exported, model):
    out, _ = exported
    schema = load(out, model.__name__)
    Draft202012Validator.check_schema(schema)
    assert schema == json.loads(json.dumps(model.model_json_schema(mode="validation")))
    assert schema.get("title") == model.__name__


@pytest.mark.parametrize("model", PUBLIC_MODELS, ids=lambda m: m.__name__)
def test_files_are_stable_sorted_json(exported, model):
    out, _ = exported
    text = (out / f"{model.__name__}.json").read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("args", [[], ["a", "b"]], ids=["none", "two"])
def test_cli_usage_errors(args, tmp_path):
    result = run_module("-m", "raytroupe.protocols.schema", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert "usage: python -m raytroupe.protocols.schema DIR" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_cli_overwrites_an_existing_directory(tmp_path):
    (tmp_path / "AgentMessage.json").write_text("stale", encoding="utf-8")
    result = run_module("-m", "raytroupe.protocols.schema", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    Draft202012Validator.check_schema(load(tmp_path, "AgentMessage"))


@pytest.mark.parametrize("kind", KINDS)
def test_envelopes_validate_against_the_exported_schema(exported, kind, sample_payloads):
    out, _ = exported
    msg = AgentMessage(
        sender="orchestrator",
        recipient="role:writer",
        reply_to="topic:done",
        job_id="j1",
        deadline=2e9,
        payload=sample_payloads[kind],
    )
    validator(out, "AgentMessage").validate(msg.model_dump(mode="json"))
    payload_schema = type(msg.payload).__name__
    validator(out, payload_schema).validate(msg.payload.model_dump(mode="json"))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sender", "a b"),
        ("recipient", "role:"),
        ("recipient", "queue:x"),
        ("attempt", 0),
        ("hops", -1),
        ("tenant", ""),
        ("bogus", 1),
        ("payload", {"kind": "gossip"}),
        ("payload", {"kind": "event", "name": ""}),
    ],
)
def test_the_exported_schema_rejects_invalid_envelopes(exported, field, value):
    out, _ = exported
    data = AgentMessage(sender="a", recipient="b", payload=Event(name="e")).model_dump(mode="json")
    data[field] = value
    with pytest.raises(jsonschema.ValidationError):
        validator(out, "AgentMessage").validate(data)


def test_the_exported_schema_requires_routing_fields(exported):
    out, _ = exported
    data = AgentMessage(sender="a", recipient="b", payload=Event(name="e")).model_dump(mode="json")
    for missing in ("sender", "recipient", "payload"):
        partial = {k: v for k, v in data.items() if k != missing}
        with pytest.raises(jsonschema.ValidationError, match=missing):
            validator(out, "AgentMessage").validate(partial)


def test_other_public_models_validate_against_their_schemas(exported):
    out, _ = exported
    samples = {
        "TeamSpec": TeamSpec.model_validate(
            {
                "agents": [{"name": "w1", "role": "writer", "tools": ["search"]}],
                "models": {"default": {"provider": "offline"}},
            }
        ),
        "Plan": Plan.model_validate(
            {
                "subtasks": [
                    {"id": "a", "role": "r", "instructions": "x"},
                    {"id": "b", "role": "r", "instructions": "y", "depends_on": ["a"]},
                ]
            }
        ),
        "JobResult": JobResult(
            job_id="j",
            task="t",
            team="team",
            status="succeeded",
            answer="42",
            timings=Timings(submitted_at=1.0, finished_at=2.0),
        ),
        "JobEvent": JobEvent(job_id="j", seq=1, at=1.0, type="job_submitted", data={"n": 1}),
        "DeadLetter": DeadLetter(
            at=1.0,
            reason=ErrorCode.HOP_LIMIT,
            detail="loop",
            message=AgentMessage(sender="a", recipient="b", payload=Event(name="e")),
        ),
    }
    for name, sample in samples.items():
        validator(out, name).validate(sample.model_dump(mode="json"))
    with pytest.raises(jsonschema.ValidationError):
        validator(out, "TeamSpec").validate({"agents": []})
    with pytest.raises(jsonschema.ValidationError):
        validator(out, "Plan").validate(
            {"subtasks": [{"id": "a b", "role": "r", "instructions": "x"}]}
        )


def test_importing_protocols_does_not_import_ray(tmp_path):
    code = "import sys, protocols, protocols.schema; print('ray' in sys.modules)"
    result = run_module("-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_unit_tests_cannot_start_ray():
    import ray  # noqa: PLC0415 - the guard under test patches this module

    with pytest.raises(RuntimeError, match="unit tests must not start Ray"):
        ray.init()
