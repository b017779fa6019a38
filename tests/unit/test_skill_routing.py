"""Routing among skills and teams: each stage of the cascade decides, thresholds, ties, accuracy.

The accuracy test runs the real cascade (keywords, MiniLM similarity, then the offline
classifier model) over the labelled set in ``tests/data/skill_routing.json`` (60 requests
over the 6 skills of ``examples/skills``) and prints the share each stage decided.
"""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from wiring import run

from raytroupe.actors.desk.intent import IntentClassifier
from raytroupe.actors.llm.offline import OfflineProvider
from raytroupe.actors.skills.config import RoutingConfig
from raytroupe.actors.skills.files import read_skill
from raytroupe.actors.skills.routing import routing_config
from raytroupe.protocols import AgentSpec, ConfigError, TeamSpec
from raytroupe.protocols.skill import SkillSpec

ROOT = Path(__file__).parents[2]
CASES = json.loads((ROOT / "tests" / "data" / "skill_routing.json").read_text())["cases"]


def _skills():
    folder = ROOT / "examples" / "skills"
    return [read_skill(p) for p in sorted(folder.iterdir()) if p.suffix in {".yaml", ".md"}]


def _skill(name, **intent):
    return SkillSpec(name=name, version="1", description=f"{name} skill",
                     prompt={"instructions": "x"}, intent=intent)  # fmt: skip


class _Vectors:
    """An embedding that puts each text at a fixed vector (by its first word)."""

    def __init__(self, by_word):
        self.by_word = by_word

    def embed(self, texts):
        return np.array([self.by_word[t.split()[0].lower()] for t in texts], dtype=np.float32)


async def _offline(request):
    return await OfflineProvider().complete(request)


def test_targets_are_skills_and_teams_with_their_intent():
    team = TeamSpec(name="research", description="Investigates questions.",
                    agents=[AgentSpec(name="ada", role="researcher")],
                    intent={"keywords": ["investigate"]})  # fmt: skip
    bare = TeamSpec(name="ops", agents=[AgentSpec(name="bob", role="operator")])
    skill = _skill("summarize", keywords=["summarize"], examples=["gist of this"])
    clash = TeamSpec(name="summarize", agents=[AgentSpec(name="cy", role="writer")])
    config, kinds = routing_config([skill], {"research": team, "ops": bare, "summarize": clash},
                                   RoutingConfig(margin=0.1))  # fmt: skip
    assert kinds == {"summarize": "skill", "research": "team", "ops": "team"}
    assert config.targets["research"] == "Investigates questions."
    assert config.targets["ops"] == "the ops team (operator)"
    assert config.examples == {"summarize": ("gist of this",)}
    assert [r.target for r in config.rules] == ["summarize", "research"]
    assert config.margin == 0.1
    with pytest.raises(ConfigError, match="none to route it to"):
        routing_config([], {}, RoutingConfig())


def test_each_stage_decides_and_the_thresholds_hold():
    skills = [
        _skill("alpha", keywords=["alpha"], description="north things", examples=["east example"]),
        _skill("beta", description="south things"),
    ]
    vectors = {
        "north": [1, 0, 0], "east": [0, 1, 0], "south": [0, 0, 1],
        "about-east": [0, 1, 0], "middle": [0.6, 0, 0.6], "nowhere": [0.3, 0.3, 0.3],
    }  # fmt: skip
    config, _ = routing_config(skills, {}, RoutingConfig(similarity_threshold=0.5, margin=0.1))

    def classify(task):
        router = IntentClassifier(config, embedder=_Vectors(vectors))
        return run(router.classify(task, _offline))

    by_keyword = classify("north of Alpha")
    assert (by_keyword.target, by_keyword.method) == ("alpha", "keyword")
    by_example = classify("about-east please")  # close to an example of alpha, not its description
    assert (by_example.target, by_example.method) == ("alpha", "similarity")
    assert by_example.score == pytest.approx(1.0)
    tie = classify("middle ground")  # equally close to both: under the margin -> the model
    assert tie.method == "classifier"
    weak = classify("nowhere south")  # the best is below the threshold -> the model
    assert weak.method == "classifier"
    assert weak.target == "beta"  # the offline classifier: the description sharing a word


def test_routing_accuracy_over_the_labelled_set():
    skills = _skills()
    assert len({s.name for s in skills}) == 6
    assert Counter(c["skill"] for c in CASES) == dict.fromkeys((s.name for s in skills), 10)
    config, kinds = routing_config(skills, {}, RoutingConfig())
    router = IntentClassifier(config)

    async def route_all():
        return [await router.classify(c["input"], _offline) for c in CASES]

    routes = run(route_all())
    right = [r.target == c["skill"] for r, c in zip(routes, CASES, strict=True)]
    accuracy = sum(right) / len(CASES)
    by_stage = Counter(r.method for r in routes)
    right_by_stage = Counter(r.method for r, ok in zip(routes, right, strict=True) if ok)
    shares = ", ".join(
        f"{m} {by_stage[m] / len(CASES):.0%} ({right_by_stage[m]}/{by_stage[m]} right)"
        for m in ("keyword", "similarity", "classifier")
    )
    print(  # noqa: T201 - the figures are the point of this test (pytest -s)
        f"\nskill routing: accuracy {accuracy:.3f} over {len(CASES)} requests; decided by {shares}"
    )
    wrong = [(c["input"], c["skill"], r.target, r.method) for r, c, ok in
             zip(routes, CASES, right, strict=True) if not ok]  # fmt: skip
    assert accuracy >= 0.9, wrong
    assert set(kinds.values()) == {"skill"}
