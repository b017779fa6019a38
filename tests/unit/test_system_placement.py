"""Where each system actor may run: pinned to the head while its state is on the head's disk."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from actors.spawn import HEAD_NODE, _placed
from actors.state import checked_state_url
from actors.tools.config import ToolsConfig
from protocols import ConfigError


def test_an_actor_with_files_on_its_node_is_pinned_to_the_head():
    options = _placed("orchestrator", local_files=True, system_resources={"troupe_system": 1})
    assert options["resources"] == {HEAD_NODE: 0.001}
    assert options["name"] == "orchestrator"
    assert options["lifetime"] == "detached"


def test_an_actor_without_local_files_runs_anywhere_or_where_the_operator_says():
    assert "resources" not in _placed("router", local_files=False, system_resources=None)
    placed = _placed("llm", local_files=False, system_resources={"troupe_system": 0.001})
    assert placed["resources"] == {"troupe_system": 0.001}


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
