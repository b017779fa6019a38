"""docs/configuration.md is what the models say now: rendered again and compared, byte for byte.

When a configuration model changes, run ``python -m raytroupe.deployments.config_reference``
and commit the file.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.system_config import SystemConfig
from raytroupe.actors.tools.config import ToolsConfig
from raytroupe.deployments import config_reference
from raytroupe.deployments.config import APIConfig
from raytroupe.protocols import (
    AgentSpec,
    AnthropicModel,
    LocalModel,
    OfflineModel,
    OpenAICompatibleModel,
    OpenAIModel,
    SkillSpec,
    TeamSpec,
)

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "configuration.md"
REGENERATE = "python -m raytroupe.deployments.config_reference"


def test_the_committed_reference_is_the_one_the_models_render_now():
    rendered = config_reference.render()
    committed = COMMITTED.read_text(encoding="utf-8")
    assert committed == rendered, f"docs/configuration.md is out of date: run `{REGENERATE}`"


@pytest.mark.parametrize(
    "model",
    [SystemConfig, ToolsConfig, LLMConfig, MemoryConfig, SkillsConfig, APIConfig, TeamSpec,
     AgentSpec, SkillSpec, OpenAIModel, AnthropicModel, OpenAICompatibleModel, LocalModel,
     OfflineModel],
)  # fmt: skip
def test_every_model_of_the_brief_has_a_section_listing_each_of_its_fields(model):
    text = config_reference.render()
    heading = f"\n### {model.__name__}\n"
    assert heading in text
    section = text.split(heading, 1)[1].split("\n### ", 1)[0]
    for name, field in model.model_fields.items():
        assert f"| `{field.alias or name}` |" in section, f"{model.__name__}.{name}"


def test_a_section_says_each_fields_type_default_and_description():
    text = config_reference.render()
    row = next(line for line in text.splitlines() if line.startswith("| `replicas` |"))
    assert row == (
        "| `replicas` | integer (>= 1, <= 64) | `1` | Pool replicas (actors llm/0, llm/1, ...): "
        "each serves calls, all share one budget ledger, and each deployment's rpm, tpm and "
        "max_concurrency are split between them, so that together they stay within the "
        "provider's quota. |"
    )
    assert "| `tools` | [ToolsConfig](#toolsconfig) | its defaults |" in text
    agents = "| `agents` | list of [AgentSpec](#agentspec) (length >= 1, length <= 256) |"
    assert agents in text


def test_defaults_that_depend_on_the_machine_are_written_the_same_everywhere(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "someone"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # forget the temp dir it found before
    text = config_reference.render()
    assert "| `journal` | path | `~/.raytroupe/journal.sqlite` |" in text
    assert "`<temp dir>/raytroupe-<uid>/scratch`" in text
    assert str(tmp_path) not in text
    assert text == COMMITTED.read_text(encoding="utf-8")


def test_the_command_writes_the_file_it_is_given(tmp_path, capsys):
    out = tmp_path / "reference.md"
    assert config_reference.main([str(out)]) == 0
    assert out.read_text(encoding="utf-8") == config_reference.render()
    assert capsys.readouterr().out.strip() == str(out)
    assert config_reference.main(["a", "b"]) == 2
