"""An MCP server's tools given to a team: the sandboxes start the server and offer its tools.

Usage: python examples/mcp_tools.py

The operator lists MCP servers in the tool sandboxes' configuration
(``ToolsConfig(mcp_servers=[MCPServerSpec(...)])``, or ``tools.mcp_servers`` in
``troupe.yaml``): a command for a stdio server (here ``examples/mcp_server.py``, started by
each sandbox as a child process and restarted if it dies) or a ``url`` for a streamable-HTTP
one. Each of its tools joins the sandboxes' tools with the server's own name, description and
JSON Schema; an agent that lists a tool's name in its ``tools`` may call it, and the sandbox
checks the arguments against that schema before the server sees them.

Which tool to call is a model's decision. The offline model calls only the built-in
calculator, so the agent runs on a ScriptedModel that plays the turns a real model would (a
call the schema refuses, two good ones, then an answer): the server, the checks, the calls
and their results are real, the agent's last sentence is the script's. Runs on an embedded
local Ray of its own, with no keys and no network.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import ray

import raytroupe
from raytroupe.protocols import PlannedSubtask

SERVER = raytroupe.MCPServerSpec(
    name="units",
    # the sandbox's node runs this command: the same interpreter and file on every node
    command=(sys.executable, str(Path(__file__).resolve().with_name("mcp_server.py"))),
    side_effects=False,  # pure functions: a call cut short by a restart may be retried
)


def call(tool: str, **arguments: object) -> raytroupe.ScriptedTurn:
    """One model turn that calls ``tool(arguments)``."""
    made = raytroupe.ToolCall(call_id=f"call-{tool}", tool=tool, arguments=arguments)
    return raytroupe.ScriptedTurn(tool_calls=(made,))


def team() -> raytroupe.Team:
    """One travel agent who may use both of the server's tools."""
    script = raytroupe.ScriptedModel(
        turns=(  # what a real model would decide to call, then its answer
            call("convert_distance", value=42.195, to="miles"),  # not in the schema: refused
            call("convert_distance", value=42.195, to="mi"),  # the model corrects itself
            call("convert_temperature", value=18, to="F"),
            raytroupe.ScriptedTurn(text="The marathon is 26.219 miles; 18 C is 64.4 F."),
        )
    )
    return raytroupe.Team(
        name="travel",
        agents=[
            {
                "name": "tess",
                "role": "guide",
                "model": "tess-model",
                "tools": ["convert_distance", "convert_temperature"],  # the MCP server's
            }
        ],
        models={"tess-model": script},
        planner_model="offline",
        plan=[
            PlannedSubtask(
                id="s1",
                role="guide",
                instructions="A marathon is 42.195 km and it will be 18 C: say both in US units.",
            )
        ],
    )


def main() -> None:
    """List the server's tools as the sandbox offers them, then run a job that calls them."""
    with tempfile.TemporaryDirectory(prefix="troupe-mcp-") as tmp:
        state = Path(tmp)
        rt = raytroupe.connect(
            address="local",  # a Ray of its own, even if another runs on this machine
            num_cpus=2,
            include_dashboard=False,
            log_level="warning",
            journal=state / "journal.sqlite",
            tools_config=raytroupe.ToolsConfig(
                state_dir=state / "tools", scratch_root=state / "scratch", mcp_servers=(SERVER,)
            ),
            memory_config=raytroupe.MemoryConfig(path=state / "memory"),
        )
        try:
            offered: list[raytroupe.ToolDef] = ray.get(rt.actor("tools/0").find.remote())
            print("tools of the MCP server 'units', as the sandbox offers them:")
            for tool in offered:
                if tool.source == f"mcp:{SERVER.name}":
                    properties = tool.parameters["properties"]
                    params = ", ".join(f"{k}: {_kind(v)}" for k, v in properties.items())
                    print(f"  {tool.name}({params}): {tool.description}")
            result = rt.submit("Convert for the US visitors.", team=team()).result(timeout=120)
            print(f"\nstatus: {result.status}")
            for span in result.trace:
                if span.kind == "tool_call":
                    a = span.attributes
                    shown = a["result"] if a["ok"] else f"refused, {a['error_code']}: {a['result']}"
                    print(f"  {a['tool']}({a['arguments']}) -> {shown}")
            print(f"answer: {result.answer}")
        finally:
            rt.shutdown()


def _kind(schema: dict[str, object]) -> str:
    """A parameter's JSON Schema in a few characters: its type, or its allowed values."""
    allowed = schema.get("enum")
    return " | ".join(map(repr, allowed)) if isinstance(allowed, list) else str(schema["type"])


if __name__ == "__main__":
    main()
