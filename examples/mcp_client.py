"""raytroupe's teams and skills as MCP tools, called with the official ``mcp`` client.

Usage: python examples/mcp_client.py [--port PORT]

Starts raytroupe on an embedded local Ray with its HTTP app on 127.0.0.1 and an API key made
for this run, registers the research team and the sentiment skill, then does what any MCP
client does (Claude Desktop, an IDE, another agent framework) at ``<url>/mcp``: lists the
tools the key may call, calls the team's with a task (printing the progress notifications
while the job runs) and reads the job's result as a resource.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from http_app import port_argument, served
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from raytroupe import runtime

HERE = Path(__file__).parent
TASK = """\
Ray Serve exposes Python code over HTTP with autoscaling replicas.
Chroma is an embedding database that stores vectors for retrieval.
Questions:
1. What does Ray Serve do?
2. Where are embeddings stored?"""


async def talk(url: str, key: str) -> None:
    """List the tools, call the team's, read its job's result: as an MCP client does."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        for tool in (await client.list_tools()).tools:
            print(f"tool {tool.name}: {tool.description}")
            print(f"     input {json.dumps(tool.input_schema['properties'])}")

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            print(f"  progress {progress:g}/{'?' if total is None else f'{total:g}'}: {message}")

        print("\ncall team_research")
        called = await client.call_tool("team_research", {"task": TASK}, progress_callback=progress)
        output: dict[str, Any] = called.structured_content or {}
        print(f"is_error: {called.is_error}; team {output.get('team')}; "
              f"{output.get('usage', {}).get('calls')} model calls")  # fmt: skip
        print(f"answer:\n{called.content[0].text}")  # type: ignore[union-attr]
        job_id = (called.meta or {})["raytroupe/job_id"]
        read = await client.read_resource(f"troupe://jobs/{job_id}/result")
        view = json.loads(read.contents[0].text)  # type: ignore[union-attr]
        print(f"\ntroupe://jobs/{job_id}/result: status {view['status']}, "
              f"{len(view['result']['subtasks'])} subtasks")  # fmt: skip


def main() -> None:
    """Start raytroupe and its HTTP app, then talk to it over MCP."""
    port = port_argument(__doc__)
    with served("mcp-example", port, llm=runtime.OfflineModel(latency_s=0.2)) as (rt, url, key):
        rt.put_team(runtime.Team.from_yaml(HERE / "teams" / "research.yaml").spec())
        rt.put_skill(HERE / "skills" / "sentiment.yaml")
        print(f"HTTP app at {url}; MCP at {url}/mcp\n")
        anyio.run(talk, url, key)


if __name__ == "__main__":
    main()
