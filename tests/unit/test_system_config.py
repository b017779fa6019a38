"""troupe.yaml: one configuration of the system actors, read the same way everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from raytroupe.actors.system_config import StateConfig, SystemConfig
from raytroupe.deployments.config import APIConfig
from raytroupe.deployments.schemas import CONFIG_FILES, SHIPPED, schema_text
from raytroupe.protocols import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_an_empty_file_is_the_laptop_defaults(tmp_path):
    path = tmp_path / "troupe.yaml"
    path.write_text("")
    config = SystemConfig.from_yaml(path)
    assert config == SystemConfig()
    assert config.llm_config() is None  # the offline model
    assert config.state.location({}) is None  # SQLite files
    assert config.state.journal == Path.home() / ".raytroupe" / "journal.sqlite"


def test_every_section_is_read_and_paths_start_at_the_home_of_the_reader(tmp_path):
    (tmp_path / "llm.yaml").write_text("models:\n  fast:\n    provider: offline\n")
    path = tmp_path / "troupe.yaml"
    path.write_text(
        "llm: llm.yaml\n"
        "tools: {sandboxes: 3, state_dir: ~/state}\n"
        "memory: {path: ~/memory, embedding: hashing}\n"
        "state: {journal: ~/j.sqlite}\n"
        "tracing: {otel: true}\n"
        "placement: {system_resources: {troupe_system: 0.001}}\n"
    )
    with pytest.warns(DeprecationWarning, match="OTEL_EXPORTER_OTLP_ENDPOINT"):
        config = SystemConfig.from_yaml(path)  # tracing.otel: deprecated, does nothing
    assert sorted(config.llm_config().models) == ["fast"]  # relative to the file
    assert config.tools.sandboxes == 3
    assert config.tools.state_dir == Path.home() / "state"
    assert config.memory.path == Path.home() / "memory"
    assert config.state.journal == Path.home() / "j.sqlite"
    assert config.tracing.otel
    assert config.placement.system_resources == {"troupe_system": 0.001}


def test_a_bad_file_names_itself_and_each_field(tmp_path):
    path = tmp_path / "troupe.yaml"
    path.write_text(
        "tools: {sandboxes: 0}\nmemory: {embeding: minilm}\nstate: {url: mysql://x/y}\n"
    )
    with pytest.raises(ConfigError) as caught:
        SystemConfig.from_yaml(path)
    problems = caught.value.detail["problems"]
    assert str(path) in str(caught.value)
    assert any(p.startswith("tools.sandboxes:") for p in problems)
    assert any(p.startswith("memory.embeding:") for p in problems)
    assert any(p.startswith("state.url:") and "not a PostgreSQL URL" in p for p in problems)


def test_a_missing_llm_file_is_a_config_error(tmp_path):
    path = tmp_path / "troupe.yaml"
    path.write_text("llm: nowhere.yaml\n")
    with pytest.raises(ConfigError, match=r"nowhere\.yaml"):
        SystemConfig.from_yaml(path)


def test_the_state_url_and_memory_server_come_from_the_environment_when_left_out():
    env = {"TROUPE_STATE_URL": " postgresql://troupe@head:5432/troupe ",
           "TROUPE_MEMORY_SERVER": "10.0.0.10:8001"}  # fmt: skip
    config = SystemConfig()
    assert config.state.location(env) == "postgresql://troupe@head:5432/troupe"
    assert config.memory_config(env).server == "10.0.0.10:8001"
    pinned = SystemConfig.from_mapping(
        {"state": {"url": "postgresql://ops@db:5432/rt"}, "memory": {"server": "db:8000"}}
    )
    assert pinned.state.location(env) == "postgresql://ops@db:5432/rt"  # the file wins
    assert pinned.memory_config(env).server == "db:8000"
    assert StateConfig(url_env=None).location(env) is None
    assert SystemConfig(memory_server_env=None).memory_config(env).server is None


def test_a_variable_that_is_not_a_postgresql_url_is_refused_naming_it():
    with pytest.raises(ConfigError, match=r"TROUPE_STATE_URL: .* is not a PostgreSQL URL"):
        StateConfig().location({"TROUPE_STATE_URL": "sqlite:///x"})


def test_the_state_urls_password_is_never_shown(tmp_path):
    config = SystemConfig.from_mapping({"state": {"url": "postgresql://ops:hunter2-pw@db/rt"}})
    assert "hunter2" not in repr(config)
    path = tmp_path / "troupe.yaml"
    path.write_text("state: {url: 'mysql://ops:hunter2-pw@db/rt'}\n")
    with pytest.raises(ConfigError) as caught:
        SystemConfig.from_yaml(path)
    assert "hunter2" not in str(caught.value)


def test_the_serve_app_reads_its_troupe_yaml_from_args_or_the_environment(tmp_path):
    path = tmp_path / "troupe.yaml"
    path.write_text("tools: {sandboxes: 5}\n")
    assert APIConfig().system({}) == SystemConfig()
    assert APIConfig().system({"TROUPE_CONFIG": str(path)}).tools.sandboxes == 5
    assert APIConfig(system_config=path).system({}).tools.sandboxes == 5
    with pytest.raises(ConfigError, match="TROUPE_CONFIG is set but names no file"):
        APIConfig().system({"TROUPE_CONFIG": " "})


@pytest.mark.parametrize("name", sorted(CONFIG_FILES))
def test_the_shipped_schemas_are_current(name):
    assert (SHIPPED / name).read_text(encoding="utf-8") == schema_text(CONFIG_FILES[name]), (
        "regenerate: troupe config schema deployments/schemas"
    )


@pytest.mark.parametrize(
    ("path", "schema"),
    [
        ("deployments/troupe.cluster.yaml", "troupe.schema.json"),
        ("examples/config/troupe.yaml", "troupe.schema.json"),
    ],
)
def test_the_shipped_configs_match_their_schema_and_load(path, schema):
    data = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))
    jsonschema.validate(data, json.loads((SHIPPED / schema).read_text(encoding="utf-8")))
    SystemConfig.from_yaml(ROOT / path)


def test_the_serve_configs_args_match_the_api_schema():
    serve = yaml.safe_load((ROOT / "deployments/serve_config.yaml").read_text(encoding="utf-8"))
    schema = json.loads((SHIPPED / "api.schema.json").read_text(encoding="utf-8"))
    for application in serve["applications"]:
        jsonschema.validate(application.get("args") or {}, schema)


def test_scale_counts_shards_per_node_from_the_clusters_size():
    per_node = SystemConfig.from_mapping(
        {"scale": {"router_shards": "per_node", "orchestrator_shards": 2}}
    ).scale
    never = lambda: pytest.fail("the live nodes were counted")  # noqa: E731
    assert per_node.counts(never, {"TROUPE_NODES": "5"}) == (5, 2)
    assert per_node.counts(lambda: 3, {}) == (3, 2)  # no variable: the nodes alive now
    assert per_node.counts(lambda: 0, {}) == (1, 2)
    assert SystemConfig().scale.counts(never, {"TROUPE_NODES": "9"}) == (1, 1)
    for bad in ("0", "65", "five", "-1"):
        with pytest.raises(ConfigError, match="TROUPE_NODES") as info:
            per_node.counts(never, {"TROUPE_NODES": bad})
        assert info.value.detail["field"] == "scale.nodes_env"
    for refused in (0, 65, "per_host", 2.5):
        with pytest.raises(ConfigError):
            SystemConfig.from_mapping({"scale": {"router_shards": refused}})


def test_the_cluster_config_runs_a_shard_of_each_per_node():
    shipped = SystemConfig.from_yaml(ROOT / "deployments" / "troupe.cluster.yaml").scale
    assert shipped.counts(lambda: 1, {"TROUPE_NODES": "5"}) == (5, 5)
