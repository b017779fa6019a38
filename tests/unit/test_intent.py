"""Intent routing: keyword rules, then embedding similarity, then the model classifier."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from raytroupe.actors.desk.intent import IntentClassifier, classify_request
from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.llm.offline import OfflineProvider
from raytroupe.actors.memory.embeddings import HashingEmbedding, MiniLMEmbedding
from raytroupe.protocols import LLMRequest, LLMResponse, PlanError, ScriptedModel, ScriptedTurn
from raytroupe.protocols.intent import IntentChoice, IntentConfig, IntentRule
from tests.unit.wiring import run

TARGETS = {"billing": "invoices, refunds, payments", "engineering": "bugs, outages, deployments"}


def config(**fields: object) -> IntentConfig:
    return IntentConfig.model_validate({"targets": TARGETS, "embedding": "hashing", **fields})


async def never(request: LLMRequest) -> LLMResponse:
    raise AssertionError(f"the model was asked: {request.messages[-1].text!r}")


def route(router: IntentClassifier, task: str, ask=never) -> IntentChoice:
    return run(router.classify(task, ask))


class CountingEmbedder:
    def __init__(self) -> None:
        self.inner = HashingEmbedding()
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]):
        self.calls.append(list(texts))
        return self.inner.embed(texts)


# --------------------------------------------------------------------------- keyword


def test_keyword_beats_similarity():
    router = IntentClassifier(
        config(rules=(IntentRule(keywords=("urgent",), target="engineering", description="pager"),))
    )
    task = "URGENT: refunds and payments for my invoices"
    scores = dict(zip(TARGETS, run(router.similarities(task)), strict=True))
    assert scores["billing"] > 0.35 > scores["engineering"]  # similarity alone says billing

    chosen = route(router, task)

    assert chosen == IntentChoice(
        target="engineering", method="keyword", score=None, rationale="keyword 'URGENT' (pager)"
    )


def test_keywords_match_whole_words_and_phrases_in_any_case():
    rules = (IntentRule(keywords=("bug", "on call"), target="engineering"),)
    router = IntentClassifier(config(rules=rules, similarity_threshold=1.0))
    classified = []

    async def ask(request: LLMRequest) -> LLMResponse:
        classified.append(request.messages[-1].text)
        text = json.dumps({"target": "billing", "rationale": "no rule"})
        return LLMResponse(text=text, model="m", provider="test")

    assert route(router, "Found a BUG in checkout").method == "keyword"
    assert route(router, "who is On   Call tonight?").method == "keyword"
    assert route(router, "the (bug) again").method == "keyword"
    assert route(router, "the debugger hangs", ask).method == "classifier"
    assert route(router, "bugs everywhere", ask).method == "classifier"
    assert route(router, "oncall rota", ask).method == "classifier"
    assert classified == ["the debugger hangs", "bugs everywhere", "oncall rota"]


def test_first_matching_rule_wins():
    rules = (
        IntentRule(keywords=("refund",), target="billing"),
        IntentRule(keywords=("outage",), target="engineering"),
    )
    router = IntentClassifier(config(rules=rules))

    assert route(router, "an outage blocked my refund").target == "billing"
    assert route(router, "an outage, no refund").target == "billing"
    assert route(router, "an outage").target == "engineering"


# --------------------------------------------------------------------------- similarity


def test_similarity_routes_a_clear_match_and_records_the_score():
    router = IntentClassifier(config())

    chosen = route(router, "refunds and payments for my invoices")

    best, second = run(router.similarities("refunds and payments for my invoices"))
    assert chosen.target == "billing"
    assert chosen.method == "similarity"
    assert chosen.score == pytest.approx(best)
    assert best >= 0.35
    assert best - second >= 0.05
    assert chosen.rationale.startswith(f"closest description (cosine {best:.3f}")
    assert "next 'engineering'" in chosen.rationale


def test_target_descriptions_are_embedded_once_and_lazily():
    embedder = CountingEmbedder()
    rules = (IntentRule(keywords=("urgent",), target="engineering"),)
    router = IntentClassifier(config(rules=rules), embedder=embedder)

    route(router, "urgent")
    assert embedder.calls == []  # a keyword route embeds nothing

    route(router, "refunds and payments for my invoices")
    route(router, "outages after deployments")
    assert embedder.calls == [
        list(TARGETS.values()),
        ["refunds and payments for my invoices"],
        ["outages after deployments"],
    ]


def test_a_single_target_needs_only_the_threshold():
    router = IntentClassifier(
        IntentConfig(targets={"billing": TARGETS["billing"]}, embedding="hashing")
    )

    chosen = route(router, "refunds and payments for my invoices")

    assert (chosen.target, chosen.method) == ("billing", "similarity")
    assert "next" not in chosen.rationale


def test_minilm_routes_a_paraphrase_by_similarity():
    targets = {
        "billing": "billing: invoices, refunds, payments",
        "engineering": "engineering: bugs, outages, deployments",
    }
    router = IntentClassifier(IntentConfig(targets=targets), embedder=MiniLMEmbedding())
    lexical = IntentClassifier(IntentConfig(targets=targets), embedder=HashingEmbedding())
    cases = {
        "I was billed twice this month": "billing",
        "the site is down after the release": "engineering",
    }

    for task, target in cases.items():
        chosen = route(router, task)
        assert (chosen.target, chosen.method) == (target, "similarity"), chosen
        # the words differ: a lexical embedding cannot see the match
        assert max(run(lexical.similarities(task))) < 0.35


# --------------------------------------------------------------------------- classifier


def test_close_scores_go_to_the_classifier_through_the_pool():
    router = IntentClassifier(config(similarity_threshold=0.1))
    task = "refunds after outages, says engineering"
    billing, engineering = run(router.similarities(task))
    assert min(billing, engineering) >= 0.1
    assert abs(billing - engineering) < 0.05  # too close to call

    pool = LLMAdapterPool()
    chosen = route(router, task, pool.complete)

    assert chosen.method == "classifier"
    assert chosen.target == "engineering"  # the offline model: 'engineering' and 'outage' match
    assert chosen.score is None
    assert chosen.rationale == "shares with the task: engineering, outage"


def test_weak_scores_go_to_the_classifier():
    router = IntentClassifier(config())
    task = "please look at payment"
    assert max(run(router.similarities(task))) < 0.35

    chosen = route(router, task, LLMAdapterPool().complete)

    assert (chosen.target, chosen.method) == ("billing", "classifier")
    assert chosen.rationale == "shares with the task: payment"


def test_classifier_request_lists_the_targets_and_constrains_the_answer():
    cfg = config(classifier_model="router-model")
    seen: list[LLMRequest] = []

    async def ask(request: LLMRequest) -> LLMResponse:
        seen.append(request)
        text = '```json\n{"target": "engineering", "rationale": "it is down"}\n```'
        return LLMResponse(text=text, model="m", provider="test")

    chosen = route(IntentClassifier(cfg), "hello there", ask)

    assert chosen == IntentChoice(
        target="engineering", method="classifier", score=None, rationale="it is down"
    )
    (request,) = seen
    assert request == classify_request("hello there", cfg)
    assert request.model == "router-model"
    assert request.purpose == "classify"
    assert request.messages[-1].text == "hello there"
    assert "- billing: invoices, refunds, payments" in request.messages[0].text
    assert request.response_format is not None
    properties = request.response_format["properties"]
    assert properties["target"]["enum"] == ["billing", "engineering"]
    assert request.response_format["required"] == ["target", "rationale"]


@pytest.mark.parametrize(
    "answer",
    [
        '{"target": "sales", "rationale": "it sells"}',
        '{"rationale": "no target"}',
        '["billing"]',
        "billing",
        '{"target": "billing", "rationale": 3}',
    ],
)
def test_an_invalid_classifier_answer_is_a_plan_error(answer):
    pool = LLMAdapterPool({"default": ScriptedModel(turns=(ScriptedTurn(text=answer),))})
    router = IntentClassifier(config())

    with pytest.raises(PlanError) as caught:
        route(router, "hello there", pool.complete)

    assert caught.value.detail["answer"] == answer
    assert caught.value.detail["targets"] == ["billing", "engineering"]


def test_offline_classifier_prefers_the_first_target_on_a_tie():
    cfg = config()

    async def classify(task: str) -> dict[str, str]:
        response = await OfflineProvider().complete(classify_request(task, cfg))
        return json.loads(response.text)

    assert run(classify("refunds and outages"))["target"] == "billing"
    assert run(classify("outages and refunds"))["target"] == "billing"
    assert run(classify("nothing in common")) == {
        "target": "billing",
        "rationale": "shares with the task: nothing; the first target",
    }
    assert run(classify("two outages, one bug"))["target"] == "engineering"


# --------------------------------------------------------------------------- config


def test_rules_must_name_known_targets():
    with pytest.raises(ValidationError, match="unknown targets: sales"):
        config(rules=(IntentRule(keywords=("deal",), target="sales"),))


def test_rules_need_keywords_that_are_not_blank():
    with pytest.raises(ValidationError):
        IntentRule(keywords=(), target="billing")
    with pytest.raises(ValidationError, match="blank"):
        IntentRule(keywords=("refund", "  "), target="billing")
    assert IntentRule(keywords=(" refund ",), target="billing").keywords == ("refund",)


def test_a_config_needs_targets():
    with pytest.raises(ValidationError):
        IntentConfig(targets={})
