"""A/B experiments on the session's Ray: live traffic split between skill versions, decided.

The offline model answers a direct skill with the two notes of the request that share most
words with the skill's prompt (ties: the earlier note). Requests hold three notes and the
right code is in the beta note (even requests) or the delta note (odd ones); the quality
gate wants the code ending in 22. Version 1 ("alpha and beta") is right on even requests
only, version 2 ("beta and delta") on all: a planted better arm.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
import ray

from raytroupe import runtime
from raytroupe.protocols.experiments import ExperimentInfo
from raytroupe.protocols.skill import SkillSpec
from tests.support.http_api import ADMIN_KEY, RED_KEY, USER_KEY, finished

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "ab_experiment.py"
TROUPE = Path(sys.executable).parent / "troupe"
MAX_JOBS = 160
"""Bounded loops: jobs a test submits at most before it gives up on a decision."""


def _example() -> ModuleType:
    """The README's worked example: its skill versions and requests are these tests' too."""
    spec = importlib.util.spec_from_file_location("ab_experiment", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


AB = _example()
_request = AB.request


def _notes_skill(name: str, version: str, instructions: str) -> SkillSpec:
    spec: SkillSpec = AB.notes_skill(version, instructions, name=name)
    return spec


def _mixed(j: int) -> str:
    """The j-th request of the split: an even one (version 1 right) once in three, else odd.

    Version 1's share right is then about 1/3: its 25 jobs have 20 or more right (the
    permutation test's p is then 0.0535, over the 0.05 it must beat) with probability 2.3e-6,
    and none right (the test wants it both right and wrong) with 4.0e-5: a false failure once
    in ~24,000 runs (binomial(25, 1/3); which arm a request goes to is random, independent of
    the request). With version 1 right on every other request it was once in ~490.
    """
    return _request(2 * j if j % 3 == 0 else 2 * j + 1)


def _troupe(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, joining this session's Ray by its address."""
    address = ray.get_runtime_context().gcs_address
    return subprocess.run(
        [str(TROUPE), *args, "--address", address],
        capture_output=True, text=True, timeout=180, check=False, cwd=ROOT,
        env={**os.environ, "RAY_ADDRESS": address},
    )  # fmt: skip


def _only_admins_see_it(api, info: ExperimentInfo) -> None:
    """An admin key sees the experiment over HTTP; a tenant's key does not."""
    with api.client(ADMIN_KEY) as admin, api.client(USER_KEY) as user:
        listed = admin.get("/v1/experiments")
        assert listed.status_code == 200
        assert "ab-notes" in [e["spec"]["name"] for e in listed.json()]
        shown = ExperimentInfo.model_validate(admin.get("/v1/experiments/ab-notes").json())
        assert shown.decision == info.decision
        assert user.get("/v1/experiments").status_code == 403
        assert user.get("/v1/experiments/ab-notes").status_code == 403
        assert user.post("/v1/experiments", json=info.spec.model_dump()).status_code == 403
        assert admin.post("/v1/experiments/ab-notes/stop").status_code == 409  # it has ended
        assert admin.get("/v1/experiments/no-such").status_code == 404
        assert admin.get("/v1/experiments/..%2Fetc").status_code in {404, 422}


def test_a_planted_better_version_wins_within_the_stated_sample_and_is_promoted(rt, api):
    rt.put_skill(_notes_skill("sk-ab", "2", "Read the beta and delta notes."))
    rt.put_skill(_notes_skill("sk-ab", "1", "Read the alpha and beta notes."))
    assert rt.skill("sk-ab").version == "1"
    started = rt.start_experiment({
        "name": "ab-notes", "skill": "sk-ab", "arms": [{"version": "1"}, {"version": "2"}],
        "min_effect": 0.4, "auto_promote": True,
    })  # fmt: skip
    assert (started.status, started.samples_per_arm) == ("running", 25)  # the stated horizon
    pinned = rt.submit(_request(1), skill="sk-ab@1")  # a version named: not in the experiment
    with pytest.raises(runtime.JobFailed):
        pinned.result(timeout=60)  # version 1 is wrong on odd requests
    with api.client(RED_KEY) as red:  # refused by its policy after the arm was chosen
        over = {"task": _request(0), "skill": "sk-ab", "budget": {"tokens": 10_000_000}}
        refused = red.post("/v1/jobs", json=over)
        assert refused.status_code == 403
        assert "exceeds the ceiling" in refused.json()["detail"]
    assert sum(a.assigned for a in rt.experiment("ab-notes").arms) == 0  # neither is counted
    ran: dict[str, str] = {}
    info = rt.experiment("ab-notes")
    k = 0
    while info.status == "running" and k < MAX_JOBS:
        wave = [rt.submit(_mixed(k + i), skill="sk-ab") for i in range(8)]
        for job in wave:
            try:
                ran[job.job_id] = job.result(timeout=60).output.version
            except runtime.JobFailed as failed:
                ran[job.job_id] = failed.detail["result"].output.version
        k += len(wave)
        info = rt.experiment("ab-notes")
    assert info.status == "decided", f"no decision after {k} jobs: {info.arms}"
    assert info.decision.winner == "2"
    arms = {a.version: a for a in info.arms}
    assert arms["1"].sample == arms["2"].sample == 25  # decided at the horizon, not before
    assert arms["2"].success_rate == 1.0
    # version 1 is right on the even requests of its sample, about one in three (_mixed)
    assert 0.0 < arms["1"].success_rate < 1.0
    # every job by name until the decision took part (the pinned one did not); the check
    # decides within a second of the horizon, so the last wave's later jobs may not have
    assigned = arms["1"].assigned + arms["2"].assigned
    assert 50 <= assigned <= len(ran)
    assert list(ran.values())[:assigned].count("1") == arms["1"].assigned  # the arms they ran
    assert set(ran.values()) == {"1", "2"}
    (compared,) = info.decision.comparisons
    assert compared.significant
    assert compared.p_value < 0.05
    assert info.promoted
    assert rt.skill("sk-ab").version == "2"
    assert rt.skill_history("sk-ab")[-1].source == "experiment:ab-notes"
    after = rt.submit(_request(3), skill="sk-ab").result(timeout=60)  # the split is over
    assert after.output.version == "2"
    assert sum(a.assigned for a in rt.experiment("ab-notes").arms) == assigned
    _only_admins_see_it(api, info)


def test_equal_arms_scored_by_people_declare_no_winner_over_http_and_the_cli(rt, api):
    """Two versions of one prompt; people's feedback is 1, 0, 1, 0, ... within each arm, so the
    arms are exactly equal and the test must not name a winner."""
    rt.put_skill(_notes_skill("sk-ab-eq", "1b", "Read the beta and delta notes."))
    rt.put_skill(_notes_skill("sk-ab-eq", "1", "Read the beta and delta notes."))
    started = _troupe("experiments", "start", "ab-feedback", "--skill", "sk-ab-eq",
                      "--arm", "1", "--arm", "1b:1", "--metric", "feedback",
                      "--samples-per-arm", "6")  # fmt: skip
    assert started.returncode == 0, started.stderr[-2000:]
    assert "ab-feedback · skill sk-ab-eq · running · metric feedback" in started.stdout
    scored = {"1": 0, "1b": 0}
    with api.client(USER_KEY) as user:
        for k in range(MAX_JOBS // 4):
            job_id = user.post("/v1/jobs", json={"task": _request(k), "skill": "sk-ab-eq"})
            job_id = job_id.json()["id"]
            result = finished(user, job_id)["result"]
            version = result["output"]["version"]
            score = 1.0 if scored[version] % 2 == 0 else 0.0
            given = user.post(f"/v1/jobs/{job_id}/feedback", json={"score": score})
            assert given.status_code == 201, given.text
            scored[version] += 1
            if min(scored.values()) >= 6:
                break
    assert min(scored.values()) >= 6, scored
    deadline = time.monotonic() + 30  # the front desk's checks decide within a second
    while rt.experiment("ab-feedback").status == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
    shown = _troupe("experiments", "show", "ab-feedback", "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    info = ExperimentInfo.model_validate_json(shown.stdout)
    assert info.status == "decided"
    assert info.decision.winner is None
    assert info.decision.comparisons[0].diff == 0.0
    assert info.decision.comparisons[0].p_value == 1.0
    assert "no version beats 1 on feedback" in info.decision.reason
    assert [a.feedback_count >= 6 for a in info.arms] == [True, True]
    assert not info.promoted
    assert rt.skill("sk-ab-eq").version == "1"
    table = _troupe("experiments", "list")
    assert "ab-feedback" in table.stdout
