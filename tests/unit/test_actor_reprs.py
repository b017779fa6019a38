"""What the Ray dashboard's Repr column shows of each actor: who it is and how it is set up."""

from raytroupe.actors import AgentActor, FrontDesk, LLMAdapterPool, MessageRouter, Orchestrator
from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.memory.store import MemoryStore
from raytroupe.actors.tools.config import FunctionTool
from raytroupe.actors.tools.sandbox import ToolSandbox, ToolsConfig
from raytroupe.protocols import AgentSpec, MCPServerSpec, OfflineModel
from tests.unit.wiring import LocalDesk, LocalShards


def test_an_agent_says_its_team_role_model_and_capacity():
    spec = AgentSpec(name="ada", role="researcher", model="fast", max_concurrency=3)
    agent = AgentActor(spec, router=None, team="research")
    assert (
        repr(agent)
        == "Agent(ada: team research, role researcher, model fast, 3 subtask(s) at once)"
    )
    assert "team" not in repr(AgentActor(spec, router=None))  # made outside a team


def test_the_system_actors_say_what_they_serve(tmp_path):
    pool = LLMAdapterPool({f"m{i}": OfflineModel() for i in range(9)})
    config = ToolsConfig(
        state_dir=tmp_path,
        mcp_servers=(MCPServerSpec(name="files", command=("true",)),),
        functions={"add": FunctionTool(target="operator:add")},
    )
    sandbox = ToolSandbox(config, name="tools-1")
    assert repr(MessageRouter(max_hops=8)) == (
        "Router(shard 0 of 1, hop limit 8, keeps 10000 dead letters)"
    )
    assert repr(MessageRouter(shard=2, shards=3)).startswith("Router(shard 2 of 3, ")
    assert repr(pool) == (
        "LLMAdapterPool(replica 0 of 1, 11 alias(es): "
        "default, m0, m1, m2, m3, m4, m5, m6 and 3 more)"
    )
    assert repr(sandbox) == (
        "ToolSandbox(tools-1: calculator, file_read, file_write, http_get, python; "
        "functions add; MCP files)"
    )
    memory = MemoryStore(MemoryConfig(path=tmp_path, embedding="hashing"))
    assert repr(memory) == f"MemoryStore(Chroma at {tmp_path}, embedding hashing)"
    served = MemoryStore(MemoryConfig(server="http://10.0.0.5:8000"))
    assert repr(served) == "MemoryStore(Chroma server http://10.0.0.5:8000, embedding minilm)"
    shards = LocalShards(2)
    orchestrator = Orchestrator(None, None, LocalDesk(), shards, journal=tmp_path / "j.sqlite",
                                shard=1)  # fmt: skip
    assert repr(orchestrator) == (
        f"Orchestrator(shard 1 of 2, journal {tmp_path / 'j.sqlite'}, up to 256 subtasks running)"
    )
    desk = FrontDesk(None, None, shards, journal="postgresql://troupe:secret@db:5432/troupe")
    assert repr(desk) == "FrontDesk(2 job shards, journal postgresql://troupe:***@db:5432/troupe)"
