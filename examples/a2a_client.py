"""A raytroupe team as an A2A agent, called with the ``a2a-sdk`` client from PyPI.

Usage: python examples/a2a_client.py [--port PORT]

Starts raytroupe on an embedded local Ray with its HTTP app on 127.0.0.1 and an API key made
for this run, registers the research team, then does what another company's A2A agent does
at ``<url>/a2a/research``: reads the agent card, sends a message and follows its task as it
streams (status updates, the answer as an artifact), then reads the task again by its id.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_artifact_text, get_message_text, new_text_part
from a2a.types import GetTaskRequest, Message, Role, SendMessageRequest, TaskState
from http_app import port_argument, served

from raytroupe import runtime

HERE = Path(__file__).parent
TASK = """\
Ray Serve exposes Python code over HTTP with autoscaling replicas.
Chroma is an embedding database that stores vectors for retrieval.
Questions:
1. What does Ray Serve do?
2. Where are embeddings stored?"""


async def talk(url: str, key: str) -> None:
    """Read the card, send the task and follow it, read the task: as an A2A client does."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        card = await A2ACardResolver(http, f"{url}/a2a/research").get_agent_card()
        interface = card.supported_interfaces[0]
        print(f"card: {card.name} ({card.description.strip()})")
        print(f"      {interface.protocol_binding} {interface.protocol_version} at {interface.url}")
        print(f"      streaming {card.capabilities.streaming}; "
              f"security {', '.join(card.security_schemes)}\n")  # fmt: skip
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER,
                          parts=[new_text_part(TASK)])  # fmt: skip
        task_id = ""
        async for said in client.send_message(SendMessageRequest(message=message)):
            if said.HasField("task"):
                task_id = said.task.id
                print(f"task {task_id}: {TaskState.Name(said.task.status.state)}")
            elif said.HasField("status_update"):
                status = said.status_update.status
                said_then = get_message_text(status.message)
                print(f"  {TaskState.Name(status.state)}" + (f": {said_then}" if said_then else ""))
            elif (
                said.HasField("artifact_update") and said.artifact_update.artifact.name == "answer"
            ):
                print(f"  answer:\n{get_artifact_text(said.artifact_update.artifact)}")
        task = await client.get_task(GetTaskRequest(id=task_id))
        names = ", ".join(a.name for a in task.artifacts)
        print(f"\nGetTask {task.id}: {TaskState.Name(task.status.state)}; artifacts {names}")


def main() -> None:
    """Start raytroupe and its HTTP app, then talk to it over A2A."""
    port = port_argument(__doc__)
    with served("a2a-example", port, llm=runtime.OfflineModel(latency_s=0.2)) as (rt, url, key):
        rt.put_team(runtime.Team.from_yaml(HERE / "teams" / "research.yaml").spec())
        print(f"HTTP app at {url}; the research team's A2A agent at {url}/a2a/research\n")
        asyncio.run(talk(url, key))


if __name__ == "__main__":
    main()
