"""Jobs against a faulty model server: 5xx, 429 with ``Retry-After`` and cut streams.

The agents use real provider configurations (the OpenAI and Anthropic SDKs in the LLM pool
actor) against llmock on 127.0.0.1. Faults are scripted per deployment (each job has its own
model name, so its faults hit only its calls): at most ``max_attempts - 1`` per job, so every
job must complete, within its token, money and time budgets, and never over them.

A 429's ``Retry-After`` is kept by the pool: the call it answered waits that long, and so does
every call a replica sends once it knows of it. The pool's two replicas learn of each other's
429s by one actor call, so a call another replica had already sent (or admitted a moment
before the word came) may reach the server during the wait: at most one per conversation in
flight, never a second.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter, defaultdict

import pytest
import ray
from llmock.scenarios import Fail, Match, StreamFault

from raytroupe import runtime
from raytroupe.protocols import ErrorCode
from tests.support.figures import record
from tests.support.keys import TEST_KEY_ENV

JOBS = 8
RETRY_AFTER_S = 0.4
TIME_BUDGET_S = 60.0
BUDGET = runtime.Budget(usd=0.05, tokens=20_000)
PRICES = {"input_usd_per_mtok": 2.0, "output_usd_per_mtok": 8.0}


def _deployment(llmock, provider, model):
    if provider == "openai":
        return runtime.OpenAICompatibleModel(
            base_url=llmock.base_url("openai"), model=model, **PRICES
        )
    return runtime.AnthropicModel(
        base_url=llmock.base_url("anthropic"), model=model, api_key_env=TEST_KEY_ENV, **PRICES
    )


def _team(name, model, spec):
    return runtime.Team(
        name=name,
        planner_model="offline",
        models={model: spec},
        subtask_timeout_s=TIME_BUDGET_S / 2,
        agents=[runtime.AgentSpec(name=f"{name}-w{n}", role="worker", model=model, stream=True)
                for n in range(2)],
    )  # fmt: skip


def _conversation(request) -> str:
    """Which subtask's conversation ``request`` continues: its first user message."""
    for message in (request.body or {}).get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content, sort_keys=True)
    return ""


def _faults(llmock, provider, model):
    """Three faults for this deployment: a 5xx, a 429 with Retry-After, a cut stream."""
    status = 500 if provider == "openai" else 503
    llmock.add(
        Fail(status, times=1, match=Match(model=model)),
        Fail(429, retry_after=RETRY_AFTER_S, times=1, match=Match(model=model)),
        StreamFault("disconnect", after_chunks=1, times=1, match=Match(model=model, stream=True)),
    )


def test_jobs_complete_within_their_budgets_through_5xx_429s_and_cut_streams(rt, llmock):
    run = uuid.uuid4().hex[:6]
    jobs = {}
    started = time.monotonic()
    for i in range(JOBS):
        provider = "openai" if i % 2 == 0 else "anthropic"
        model = f"mf-{run}-{i}"
        _faults(llmock, provider, model)
        team = _team(f"faults-{run}-{i}", model, _deployment(llmock, provider, model))
        task = f"Tasks:\n- Summarise fault report {i}.\n- List the retries of report {i}."
        jobs[model] = rt.submit(task, team=team, budget=BUDGET)

    results = {m: job.result(timeout=TIME_BUDGET_S) for m, job in jobs.items()}
    elapsed = time.monotonic() - started

    by_model = defaultdict(list)
    for request in llmock.requests:
        by_model[request.model].append(request)
    retries = sum(1 for rs in by_model.values() for r in rs if r.status != 200 or r.fault)
    waits, during = [], []
    for model, requests in by_model.items():
        requests.sort(key=lambda r: r.started_at)
        for index, limited in enumerate(requests):
            if limited.status != 429:
                continue
            later = requests[index + 1 :]
            # the retry of the same call (same body), and any other call made during the wait
            retry = next(r for r in later if r.fingerprint == limited.fingerprint)
            waits.append(retry.started_at - limited.ended_at)
            calls = Counter(
                _conversation(r) for r in later if r.started_at - limited.ended_at < RETRY_AFTER_S
            )
            during.append((_conversation(limited), calls))
        assert len(requests) <= 2 + 3, f"{model}: more calls than answers plus faults"
    pool = rt.actor("llm/0")
    spends = {m: ray.get(pool.spent.remote(f"job:{j.job_id}")) for m, j in jobs.items()}
    used_usd = max(s.usd / BUDGET.usd for s in spends.values())
    used_tokens = max(s.tokens / BUDGET.tokens for s in spends.values())

    record("model_faults", "jobs", JOBS, "jobs", "each: 2 subtasks, 3 faults on its deployment")
    record("model_faults", "completed", sum(r.status == "succeeded" for r in results.values()),
           "jobs")  # fmt: skip
    record("model_faults", "retries seen (faulty answers)", retries, "requests")
    record("model_faults", "429s honoured (waited >= Retry-After)",
           f"{sum(w >= RETRY_AFTER_S for w in waits)}/{len(waits)}", "",
           f"shortest wait {min(waits):.3f} s for Retry-After {RETRY_AFTER_S} s; calls of "
           f"other conversations started during a wait: "
           f"{sum(c.total() for _, c in during)}")  # fmt: skip
    record("model_faults", "budget max used / budget (USD)", round(used_usd, 4), "ratio")
    record("model_faults", "budget max used / budget (tokens)", round(used_tokens, 4), "ratio")
    record("model_faults", "wall time, all jobs", round(elapsed, 2), "s",
           f"time budget {TIME_BUDGET_S} s")  # fmt: skip

    assert all(r.status == "succeeded" for r in results.values()), {
        m: (r.status, r.error) for m, r in results.items()
    }
    assert retries == 3 * JOBS  # every scripted fault was met, and retried
    assert len(waits) == JOBS
    assert all(w >= RETRY_AFTER_S for w in waits), waits
    # the 429's own conversation waits; another has at most the one call already on its way
    assert all(_conversation(r) for r in llmock.requests), "a request without its messages"
    assert all(calls[own] == 0 for own, calls in during), during
    assert all(max(calls.values(), default=0) <= 1 for _, calls in during), during
    assert all(r.timings.total_s < TIME_BUDGET_S for r in results.values())
    for model, spend in spends.items():
        assert 0 < spend.usd <= BUDGET.usd, model
        assert 0 < spend.tokens <= BUDGET.tokens, model
        rows = rt.usage(jobs[model].job_id)
        assert sum(r.cost_usd for r in rows) == pytest.approx(spend.usd)


def test_a_tight_budget_under_faults_stops_the_job_and_is_never_exceeded(rt, llmock):
    """Failed attempts release their reservation; the job stops with ``budget_exceeded``."""
    model = f"mf-tight-{uuid.uuid4().hex[:6]}"
    _faults(llmock, "openai", model)
    budget = runtime.Budget(tokens=1_500)  # one reservation (prompt + 1024) fits, two do not
    team = _team(f"tight-{model}", model, _deployment(llmock, "openai", model))
    task = "Tasks:\n" + "\n".join(f"- Summarise fault report {i}." for i in range(6))
    job = rt.submit(task, team=team, budget=budget)
    with pytest.raises(runtime.JobFailed) as info:
        job.result(timeout=TIME_BUDGET_S)

    result = info.value.detail["result"]
    assert result.error.code is ErrorCode.BUDGET_EXCEEDED
    spent = ray.get(rt.actor("llm/0").spent.remote(f"job:{job.job_id}"))
    answered = [r for r in llmock.requests if r.model == model and r.status == 200 and not r.fault]
    record("model_faults", "tight budget: used / budget (tokens)",
           round(spent.tokens / budget.tokens, 4), "ratio",
           f"{len(answered)} answered calls, job failed budget_exceeded")  # fmt: skip
    assert spent.tokens <= budget.tokens
    assert answered
