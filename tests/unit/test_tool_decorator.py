"""``@raytroupe.tool``: functions as a team's tools, shipped to sandboxes by digest.

Without Ray: the decorator's checks, the team's bookkeeping, the sandboxes' store of shipped
functions (a restart included) and their grants. tests/integration/test_shipped_tools.py
runs them in jobs on Ray.
"""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated

import pytest
from pydantic import Field, ValidationError
from wiring import run, started_now

import raytroupe
from raytroupe.actors.tools.config import ToolsConfig
from raytroupe.actors.tools.sandbox import ToolSandbox
from raytroupe.actors.tools.shipped import MAX_SHIPPED_BYTES, ShippedTools, digest_of
from raytroupe.protocols import ConfigError, ErrorCode, TeamSpec, ToolCall


@raytroupe.tool
def stock(sku: str, warehouse: Annotated[int, Field(ge=1)] = 1) -> dict[str, object]:
    """Units of an item on hand in a warehouse.

    Not part of the description.
    """
    return {"sku": sku, "warehouse": warehouse, "on_hand": 12}


@raytroupe.tool(name="reorder", side_effects=True, requires_approval=True, timeout_s=5.0)
async def place_order(sku: str, units: int) -> str:
    """Order more of an item."""
    return f"ordered {units} x {sku}"


def discount(price: float) -> float:
    """A plain function: ten percent off."""
    return round(price * 0.9, 2)


def call(tool: str, **arguments: object) -> ToolCall:
    return ToolCall(call_id="c1", tool=tool, arguments=arguments, task_id="t1", step=1)


# -- the decorator -----------------------------------------------------------------------


def test_the_decorated_function_is_still_the_function_and_says_what_it_is():
    assert stock("a-1", 2) == {"sku": "a-1", "warehouse": 2, "on_hand": 12}
    assert (stock.name, stock.description) == ("stock", "Units of an item on hand in a warehouse.")
    assert stock.__doc__.startswith("Units of an item")
    assert (place_order.name, place_order.__name__) == ("reorder", "place_order")
    assert stock.digest == digest_of(stock.payload)
    assert stock.digest.startswith("sha256:")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: raytroupe.tool(lambda x: x), "cannot name a tool"),  # "<lambda>"
        (lambda: raytroupe.tool(name="python")(discount), "cannot name a tool"),  # a built-in
        (lambda: raytroupe.tool(name="has space")(discount), "cannot name a tool"),
        (lambda: raytroupe.tool(name="quiet")(lambda x: x), "no docstring"),
        (lambda: raytroupe.tool(variadic), "cannot be passed by keyword"),
        (lambda: raytroupe.tool(unschemable), "no JSON Schema"),
    ],
)
def test_a_function_that_cannot_be_a_tool_is_refused_when_decorated(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def variadic(*items: int) -> int:
    """Sum."""
    return sum(items)


def unschemable(where: sqlite3.Connection) -> None:
    """Takes something JSON cannot carry."""


# -- teams ----------------------------------------------------------------------------------


def _team(**fields: object) -> raytroupe.Team:
    agents = fields.pop("agents", None) or [
        {"name": "clerk", "role": "clerk", "tools": ["calculator"]},
        {"name": "buyer", "role": "buyer", "tools": [place_order]},
    ]
    return raytroupe.Team(name="shop", agents=agents, **fields)


def test_team_functions_go_to_every_agent_and_an_agents_own_to_it_alone():
    team = _team(functions=[stock, discount])
    tools = {a.name: a.tools for a in team.agents}
    assert tools == {
        "clerk": ("calculator", "stock", "discount"),
        "buyer": ("reorder", "stock", "discount"),
    }
    assert set(team.functions) == {"stock", "discount", "reorder"}
    assert team.functions["stock"] == stock.digest
    assert sorted(t.name for t in team.shipped) == ["discount", "reorder", "stock"]
    # the plain spec travels with the digests only
    spec = team.spec()
    assert type(spec) is TeamSpec
    assert spec.functions == team.functions
    assert "payload" not in spec.model_dump_json()


def test_two_different_functions_of_one_name_in_a_team_are_refused():
    other = raytroupe.tool(name="stock", description="Another stock.")(discount)
    with pytest.raises(ConfigError, match="two function tools of the team are named 'stock'"):
        _team(functions=[stock, other])


def test_a_spec_refuses_a_function_no_agent_names_and_a_malformed_digest():
    agents = [{"name": "a", "role": "r"}]
    with pytest.raises(ValidationError, match="given to no agent"):
        TeamSpec(name="t", agents=agents, functions={"stock": stock.digest})
    with pytest.raises(ValidationError, match="sha256"):
        TeamSpec(name="t", agents=[{"name": "a", "role": "r", "tools": ["x"]}],
                 functions={"x": "md5:abc"})  # fmt: skip


# -- the sandboxes' store -------------------------------------------------------------------


def test_the_store_keeps_functions_by_digest_and_a_new_instance_loads_them(tmp_path):
    with ThreadPoolExecutor(1) as pool:
        store = ShippedTools(tmp_path / "shipped.sqlite", pool)
        definition = store.put("stock", stock.digest, stock.payload)
        store.close()
        assert definition.parameters["required"] == ["sku"]
        assert definition.source == f"shipped:{stock.digest}"

        restarted = ShippedTools(tmp_path / "shipped.sqlite", pool)  # a restarted sandbox
        found = restarted.get(stock.digest)
        assert found is not None
        assert found[0].name == "stock"
        assert restarted.get(discount_digest := "sha256:" + "0" * 64) is None, discount_digest
        restarted.close()


def test_the_store_refuses_bytes_that_are_not_the_digests_or_too_many(tmp_path):
    with ThreadPoolExecutor(1) as pool:
        store = ShippedTools(tmp_path / "shipped.sqlite", pool)
        with pytest.raises(ConfigError, match="its bytes are not"):
            store.put("stock", stock.digest, stock.payload + b"x")
        with pytest.raises(ConfigError, match="is not the function tool 'discount'"):
            store.put("discount", stock.digest, stock.payload)  # stock's bytes, another name
        big = b"x" * (MAX_SHIPPED_BYTES + 1)
        with pytest.raises(ConfigError, match="ship the function, not its data"):
            store.put("big", digest_of(big), big)
        with pytest.raises(ConfigError, match="does not load here"):
            store.put("junk", digest_of(b"not a pickle"), b"not a pickle")
        store.close()


def test_a_function_kept_before_its_class_moved_to_the_protocols_still_loads(tmp_path):
    from ray import cloudpickle  # noqa: PLC0415

    from raytroupe.protocols.functions import ShippedFunction  # noqa: PLC0415

    moved = ShippedFunction.__module__
    ShippedFunction.__module__ = "raytroupe.actors.tools.functions"  # pickled by an older one
    try:
        old = bytes(cloudpickle.dumps(stock._shipped))
    finally:
        ShippedFunction.__module__ = moved
    assert b"raytroupe.actors.tools.functions" in old
    with ThreadPoolExecutor(1) as pool:
        store = ShippedTools(tmp_path / "shipped.sqlite", pool)
        assert store.put("stock", digest_of(old), old).name == "stock"
        store.close()


# -- the sandbox -------------------------------------------------------------------------------


def _sandbox(tmp_path) -> ToolSandbox:
    return started_now(
        ToolSandbox(ToolsConfig(state_dir=tmp_path / "state", scratch_root=tmp_path / "s"))
    )


def test_a_granted_agent_calls_its_teams_function_and_no_one_else_does(tmp_path):
    box = _sandbox(tmp_path)
    team = _team(functions=[stock])

    async def main():
        await box.put_functions([(t.name, t.digest, t.payload) for t in team.shipped])
        clerk = {n: d for n, d in team.functions.items() if n in team.agents[0].tools}
        specs = await box.grant("clerk", team.agents[0].tools, (), clerk)
        ran = await box.call(call("stock", sku="a-1", warehouse="3"), agent="clerk", job_id="j")
        bad = await box.call(call("stock", sku="a-1", warehouse=0), agent="clerk", job_id="j")
        await box.grant("outsider", ["calculator"])
        refused = await box.call(call("stock", sku="a-1"), agent="outsider", job_id="j")
        buyer_only = await box.call(call("reorder", sku="a", units=1), agent="clerk", job_id="j")
        await box.close()
        return specs, ran, bad, refused, buyer_only

    specs, ran, bad, refused, buyer_only = run(main())
    assert [s.name for s in specs] == ["calculator", "stock"]
    assert (ran.ok, ran.data) == (True, {"sku": "a-1", "warehouse": 3, "on_hand": 12})
    assert bad.error.code is ErrorCode.INVALID_ARGUMENTS  # ge=1, from the signature
    assert refused.error.code is ErrorCode.TOOL_NOT_ALLOWED
    assert buyer_only.error.code is ErrorCode.TOOL_NOT_ALLOWED
    assert "allowed: ['calculator', 'stock']" in buyer_only.error.message  # names, no digests


def test_grants_name_the_digest_so_another_teams_function_of_that_name_stays_its_own(tmp_path):
    box = _sandbox(tmp_path)
    cheap = raytroupe.tool(name="stock", description="Always none.")(lambda sku: 0 * len(sku))

    async def main():
        await box.put_functions([("stock", stock.digest, stock.payload),
                                 ("stock", cheap.digest, cheap.payload)])  # fmt: skip
        await box.grant("a", ["stock"], (), {"stock": stock.digest})
        await box.grant("b", ["stock"], (), {"stock": cheap.digest})
        results = [
            await box.call(call("stock", sku="x"), agent=agent, job_id="j") for agent in "ab"
        ]
        await box.close()
        return results

    mine, theirs = run(main())
    assert mine.data["on_hand"] == 12
    assert theirs.data == 0


def test_a_function_not_shipped_or_named_like_a_sandbox_tool_is_refused(tmp_path):
    box = _sandbox(tmp_path)
    shadow = raytroupe.tool(name="http-get", description="Shadows nothing.")(discount)

    async def main():
        with pytest.raises(ConfigError, match="was not shipped"):
            await box.grant("a", ["stock"], (), {"stock": stock.digest})
        named = raytroupe.tool(name="file_read2", description="x")(discount)
        await box.put_functions([(named.name, named.digest, named.payload)])
        with pytest.raises(ConfigError, match="takes the name of a tool the sandbox has"):
            await box.put_functions([("calculator", shadow.digest, shadow.payload)])
        await box.close()

    run(main())
