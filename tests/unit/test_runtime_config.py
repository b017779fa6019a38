from pathlib import Path

import pytest

from raytroupe.protocols import ConfigError, ErrorCode, ScriptedModel, TeamSpec, ToolCall
from raytroupe.runtime import Team

EXAMPLE_TEAM = Path(__file__).parents[2] / "examples" / "teams" / "research.yaml"

GOOD = """\
name: writers
planner_model: planner
max_parallel: 2
models:
  planner:
    provider: scripted
    turns:
      - text: hello
      - tool_calls:
          - {call_id: c1, tool: calculator, arguments: {expression: "1 + 1"}}
  slow:
    provider: offline
    latency_s: 0.5
agents:
  - name: ann
    role: writer
    model: slow
  - name: bob
    role: checker
    tools: [calculator]
    max_turns: 3
"""


def write(tmp_path: Path, text: str, name: str = "team.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_from_yaml_reads_a_good_file(tmp_path):
    team = Team.from_yaml(write(tmp_path, GOOD))
    assert isinstance(team, Team)
    assert (team.name, team.planner_model, team.max_parallel) == ("writers", "planner", 2)
    assert [a.name for a in team.agents] == ["ann", "bob"]
    assert team.roles == ("writer", "checker")
    assert team.agents[1].tools == ("calculator",)
    assert team.agents[1].max_turns == 3
    assert team.agents[0].max_turns == 6  # defaults apply
    planner = team.models["planner"]
    assert isinstance(planner, ScriptedModel)
    assert planner.turns[1].tool_calls == (
        ToolCall(call_id="c1", tool="calculator", arguments={"expression": "1 + 1"}),
    )
    assert team.models["slow"].latency_s == 0.5


def test_from_yaml_takes_a_string_path(tmp_path):
    assert Team.from_yaml(str(write(tmp_path, GOOD))).name == "writers"


def test_spec_is_a_plain_team_spec_with_the_same_content(tmp_path):
    team = Team.from_yaml(write(tmp_path, GOOD))
    spec = team.spec()
    assert type(spec) is TeamSpec
    assert spec.model_dump() == team.model_dump()
    assert spec == TeamSpec.model_validate(team.model_dump())


def test_a_missing_file_is_a_config_error(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="cannot read team file") as caught:
        Team.from_yaml(missing)
    assert str(missing) in caught.value.message
    assert "No such file" in caught.value.message
    assert caught.value.code is ErrorCode.CONFIG


def test_a_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read team file"):
        Team.from_yaml(tmp_path)


def test_invalid_yaml_is_a_config_error(tmp_path):
    path = write(tmp_path, "name: [unclosed\nagents: {")
    with pytest.raises(ConfigError, match="not valid YAML") as caught:
        Team.from_yaml(path)
    assert caught.value.message.startswith(str(path))


@pytest.mark.parametrize(
    ("text", "kind"), [("- a\n- b\n", "list"), ("just words\n", "str"), ("", "NoneType")]
)
def test_a_document_that_is_not_a_mapping_is_a_config_error(tmp_path, text, kind):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=f"a team must be a mapping, got {kind}") as caught:
        Team.from_yaml(path)
    assert caught.value.message.startswith(str(path))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("name: empty\n", "agents: Field required"),
        ("agents: []\n", "agents: Tuple should have at least 1 item"),
        ("agents:\n  - {name: router, role: x}\n", "reserved for a system actor"),
        ("agents:\n  - {name: a, role: x}\n  - {name: a, role: y}\n", "duplicate agent names: a"),
        ("agents:\n  - {name: a, role: x, max_turns: 0}\n", "agents.0.max_turns"),
        ("agents:\n  - {name: 'bad name', role: x}\n", "agents.0.name"),
        ("agents:\n  - {name: a, role: x, colour: red}\n", "agents.0.colour: Extra inputs"),
        (
            "agents:\n  - {name: a, role: x}\nmodels:\n  m: {provider: gpt}\n",
            "models.m",
        ),
    ],
)
def test_an_invalid_team_is_a_config_error_listing_the_problems(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match="invalid team") as caught:
        Team.from_yaml(path)
    problems = caught.value.detail["problems"]
    assert problems
    assert any(problem in p for p in problems), problems
    assert problem in caught.value.message
    assert caught.value.message.startswith(f"{path}: invalid team: ")


def test_from_dict_names_its_source():
    with pytest.raises(ConfigError, match=r"^inline: a team must be a mapping, got int$"):
        Team.from_dict(3, source="inline")
    with pytest.raises(ConfigError, match=r"^team: invalid team"):
        Team.from_dict({})
    team = Team.from_dict({"agents": [{"name": "a", "role": "x"}]})
    assert team.name == "team"
    assert team.spec() == TeamSpec(agents=team.agents)


def test_the_example_research_team_loads():
    team = Team.from_yaml(EXAMPLE_TEAM)
    assert team.name == "research"
    assert team.planner_model == "default"
    assert [(a.name, a.role) for a in team.agents] == [
        ("ada", "researcher"),
        ("grace", "researcher"),
        ("alan", "analyst"),
    ]
    assert team.roles == ("researcher", "analyst")
    assert [a.tools for a in team.agents] == [(), (), ("calculator",)]
    assert all(a.instructions for a in team.agents)
    assert team.spec().model_dump() == team.model_dump()
