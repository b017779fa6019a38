"""Where each system actor may run: pinned to the head while its state is on the head's disk."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from raytroupe.actors.ray_placement import HEAD_NODE, _placed, _spread, least_loaded_node
from raytroupe.actors.state import checked_state_url
from raytroupe.actors.system_config import PlacementConfig
from raytroupe.actors.tools.config import ToolsConfig
from raytroupe.protocols import ConfigError


def test_an_actor_with_files_on_its_node_is_pinned_to_the_head():
    options = _placed("orchestrator", local_files=True, system_resources={"troupe_system": 1})
    assert options["resources"] == {HEAD_NODE: 0.001}
    assert options["name"] == "orchestrator"
    assert options["lifetime"] == "detached"


def test_an_actor_without_local_files_runs_anywhere_or_where_the_operator_says():
    assert "resources" not in _placed("router", local_files=False, system_resources=None)
    placed = _placed("llm", local_files=False, system_resources={"troupe_system": 0.001})
    assert placed["resources"] == {"troupe_system": 0.001}


def test_one_kind_of_system_actor_can_have_nodes_of_its_own():
    kinds = {"llm": {"troupe_llm": 1.0}, "tools": {"troupe_tools": 0.5}}
    llm = _placed("llm", local_files=False, system_resources={"s": 1}, actor_resources=kinds)
    assert llm["resources"] == {"troupe_llm": 1.0}
    sandbox = _placed("tools/3", local_files=False, system_resources=None, actor_resources=kinds)
    assert sandbox["resources"] == {"troupe_tools": 0.5}
    router = _placed("router", local_files=False, system_resources={"s": 1}, actor_resources=kinds)
    assert router["resources"] == {"s": 1}  # no entry of its own: the common resources


def test_resources_for_an_actor_pinned_to_its_files_are_a_config_error():
    with pytest.raises(ConfigError, match="keeps its state in files") as caught:
        _placed("llm", local_files=True, system_resources=None,
                actor_resources={"llm": {"troupe_llm": 1.0}})  # fmt: skip
    assert caught.value.detail == {"field": "placement.actors.llm"}


def test_placement_in_troupe_yaml_names_only_system_actors():
    placement = PlacementConfig.model_validate({"actors": {"orchestrator": {"troupe_orch": 1}}})
    assert placement.actors == {"orchestrator": {"troupe_orch": 1.0}}
    with pytest.raises(ValidationError, match="agent"):
        PlacementConfig.model_validate({"actors": {"agent": {"x": 1}}})


def test_the_head_resource_is_rays_own_name_for_it():
    from ray._common.constants import HEAD_NODE_RESOURCE_NAME  # noqa: PLC0415

    assert HEAD_NODE == HEAD_NODE_RESOURCE_NAME


def test_a_state_url_that_is_not_postgresql_is_a_config_error_naming_the_field():
    with pytest.raises(ConfigError, match="not a PostgreSQL URL") as caught:
        checked_state_url("sqlite:////tmp/x", field="state_url")
    assert caught.value.detail == {"field": "state_url"}
    assert checked_state_url("postgres://u@h/db", field="state_url") == "postgres://u@h/db"


def test_the_tools_state_url_is_checked_and_its_password_kept_out_of_reprs():
    config = ToolsConfig(state_url="postgresql://u:s3cret-pw@h:5432/db")
    assert "s3cret" not in repr(config)
    with pytest.raises(ValidationError, match="not a PostgreSQL URL"):
        ToolsConfig(state_url="http://h/db")


def _node(node_id: str, cpus: float, *, alive: bool = True) -> dict[str, object]:
    return {"NodeID": node_id, "Alive": alive, "Resources": {"CPU": cpus}}


def test_agents_go_to_the_least_loaded_alive_node_big_enough_for_them():
    nodes = [_node("b", 2), _node("a", 0), _node("c", 4, alive=False)]
    assert least_loaded_node(nodes, {}, 0) == "a"  # a tie goes to the lowest id
    assert least_loaded_node(nodes, {"a": 1}, 0) == "b"
    assert least_loaded_node(nodes, {"a": 1, "b": 1}, 0) == "a"
    assert least_loaded_node(nodes, {}, 1) == "b"  # the head has no CPU for it; c is dead
    assert least_loaded_node(nodes, {}, 3) is None  # Ray waits for a node that fits


def test_a_team_of_three_lands_on_both_nodes_of_a_two_node_cluster():
    nodes, load = [_node("head", 2), _node("worker", 2)], {}
    for _ in range(3):
        chosen = least_loaded_node(nodes, load, 0)
        assert chosen is not None
        load[chosen] = load.get(chosen, 0) + 1
    assert load == {"head": 2, "worker": 1}


def test_pool_replicas_spread_over_the_nodes_unless_pinned_to_the_head():
    free = _placed("llm-1", local_files=False, system_resources=None)
    kinds = {"llm": {"troupe_llm": 1.0}}
    assert free["name"] == "llm-1"
    assert _spread(free, 2)["scheduling_strategy"] == "SPREAD"
    assert "scheduling_strategy" not in _spread(free, 1)
    sized = _placed("llm-1", local_files=False, system_resources=None, actor_resources=kinds)
    assert _spread(sized, 3) == {**sized, "scheduling_strategy": "SPREAD"}  # resources kept
    pinned = _placed("llm-1", local_files=True, system_resources=None)
    assert "scheduling_strategy" not in _spread(pinned, 2)  # its ledger is a file on the head
