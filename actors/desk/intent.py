"""Intent routing: choose the target (a team or an agent) of a task that names none.

:class:`IntentClassifier` tries three methods, in order:

1. **keyword**: the first :class:`~raytroupe.protocols.intent.IntentRule` one of whose keywords
   occurs in the task as a whole word (or phrase), in any case;
2. **similarity**: the cosine similarity of the task's embedding to each target's
   description; the best target wins when it reaches ``similarity_threshold`` *and* leads
   the second by at least ``margin``;
3. **classifier**: otherwise the model ``classifier_model`` picks (``purpose='classify'``),
   answering JSON ``{"target": <one of the names>, "rationale": "..."}`` as the request's
   ``response_format`` asks.

Embeddings run in a worker thread (MiniLM is CPU work, and loads its model on first use),
so a router in an actor's event loop does not stall it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import numpy as np
import structlog
from numpy.typing import NDArray

from raytroupe.actors.endpoint import RouterClient, request_through_restarts
from raytroupe.protocols import (
    LLM_POOL,
    AgentMessage,
    ChatMessage,
    ConfigError,
    ErrorPayload,
    LLMRequest,
    LLMResponse,
    ModelError,
    PlanError,
    TeamSpec,
)
from raytroupe.protocols.intent import IntentChoice, IntentConfig, IntentRule
from raytroupe.protocols.json_data import JsonSchema

log = structlog.get_logger("raytroupe.desk")

__all__ = [
    "Ask",
    "Embedder",
    "IntentClassifier",
    "TeamChooser",
    "classify_request",
    "pool_asker",
]

Ask = Callable[[LLMRequest], Awaitable[LLMResponse]]
"""Sends one request to the model and returns its answer (raising ``TroupeError``s)."""

_CLASSIFIER = (
    "You route tasks. Choose the one target best suited to the user's task and say why in "
    "one sentence. Answer with JSON only. Targets:\n{targets}"
)
_ANSWER_IN_DETAIL = 2000
"""Characters of a rejected answer kept in a ``PlanError``'s detail."""


class Embedder(Protocol):
    """What the router needs of an embedding function (both offline ones qualify)."""

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """One vector per text, as a ``(len(texts), dim)`` matrix."""
        ...


def pool_asker(router: RouterClient, job_id: str | None, tenant: str) -> Ask:
    """An :data:`Ask` that sends requests to the LLM pool for ``job_id`` (if any) and ``tenant``."""

    async def ask(request: LLMRequest) -> LLMResponse:
        reply = await request_through_restarts(
            router,
            lambda: AgentMessage(sender="desk", recipient=LLM_POOL, job_id=job_id,
                                 tenant=tenant, payload=request),
        )  # fmt: skip
        if isinstance(reply.payload, LLMResponse):
            return reply.payload
        if isinstance(reply.payload, ErrorPayload):
            raise reply.payload.to_exception()
        raise ModelError(f"llm pool answered with {reply.kind!r}")

    return ask


def classify_request(task: str, config: IntentConfig) -> LLMRequest:
    """The request that asks the classifier model for the target of ``task``.

    The system message lists the targets as ``- <name>: <description>`` lines (the offline
    provider reads them), each followed by up to five of its examples; the schema allows
    exactly the target names.
    """
    listed = "\n".join(
        f"- {name}: {text}" + _examples(config.examples.get(name, ()))
        for name, text in config.targets.items()
    )
    schema: JsonSchema = {
        "type": "object",
        "properties": {
            "target": {"type": "string", "enum": list(config.targets)},
            "rationale": {"type": "string"},
        },
        "required": ["target", "rationale"],
        "additionalProperties": False,
    }
    return LLMRequest(
        model=config.classifier_model,
        purpose="classify",
        messages=(
            ChatMessage(role="system", content=_CLASSIFIER.format(targets=listed)),
            ChatMessage(role="user", content=task),
        ),
        response_format=schema,
        temperature=0.0,
    )


class IntentClassifier:
    """Routes tasks by keyword rules, then embedding similarity, then a model classifier.

    Args:
        config: targets, rules and thresholds.
        embedder: the embedding function (default: the one ``config.embedding`` names).
            Target descriptions are embedded once, on the first task that gets that far.
    """

    def __init__(self, config: IntentConfig, *, embedder: Embedder | None = None) -> None:
        self.config = config
        self._given = embedder
        self._names = list(config.targets)
        self._targets: NDArray[np.float32] | None = None
        self._owners: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._patterns = [(rule, _keyword_pattern(rule.keywords)) for rule in config.rules]

    async def classify(self, task: str, ask: Ask) -> IntentChoice:
        """The route of ``task``: by keyword, else by similarity, else by the classifier.

        Raises:
            PlanError: the classifier's answer is not JSON naming one of the targets
                (``detail['answer']`` holds it, ``detail['targets']`` the names).
            TroupeError: whatever ``ask`` raises (model errors, budgets).
        """
        for rule, pattern in self._patterns:
            match = pattern.search(task)
            if match:
                return IntentChoice(
                    target=rule.target,
                    method="keyword",
                    score=None,
                    rationale=_rule_rationale(rule, match.group(0)),
                )
        scores = await self.similarities(task)
        ranked = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable: ties keep order
        best = ranked[0]
        second = scores[ranked[1]] if len(ranked) > 1 else -1.0
        lead = scores[best] - second
        if scores[best] >= self.config.similarity_threshold and lead >= self.config.margin:
            runner_up = f"; next {self._names[ranked[1]]!r} {second:.3f}" if len(ranked) > 1 else ""
            return IntentChoice(
                target=self._names[best],
                method="similarity",
                score=scores[best],
                rationale=f"closest description (cosine {scores[best]:.3f}{runner_up})",
            )
        return await self._classify(task, ask)

    @functools.cached_property
    def _embedder(self) -> Embedder:
        """The embedding function, built on first use.

        The offline embeddings bring chromadb and tokenizers into the process, which an
        orchestrator whose jobs never get to similarity does not need.
        """
        if self._given is not None:
            return self._given
        from raytroupe.actors.memory.embeddings import HashingEmbedding, MiniLMEmbedding  # noqa: PLC0415

        return MiniLMEmbedding() if self.config.embedding == "minilm" else HashingEmbedding()

    async def similarities(self, task: str) -> list[float]:
        """Cosine similarity of ``task`` to each target, in target order.

        A target's similarity is the best of the task's to its description and to each of
        its examples (``IntentConfig.examples``).
        """
        if self._targets is None:  # two first calls at once may both embed: harmless
            texts, owners = [], []
            for index, (name, description) in enumerate(self.config.targets.items()):
                for text in (description, *self.config.examples.get(name, ())):
                    texts.append(text)
                    owners.append(index)
            self._owners = np.array(owners)
            self._targets = _unit(await asyncio.to_thread(self._embedder.embed, texts))
        query = _unit(await asyncio.to_thread(self._embedder.embed, [task]))[0]
        each = self._targets @ query
        best = np.full(len(self._names), -1.0, dtype=np.float32)
        np.maximum.at(best, self._owners, each)
        return [float(s) for s in best]

    async def _classify(self, task: str, ask: Ask) -> IntentChoice:
        response = await ask(classify_request(task, self.config))
        answer = response.text
        target, rationale = _parse_choice(answer, self._names)
        return IntentChoice(target=target, method="classifier", score=None, rationale=rationale)


def _examples(examples: tuple[str, ...]) -> str:
    """A target's examples on its line: what requests it serves, in the users' words."""
    if not examples:
        return ""
    return " For example: " + " | ".join(e.replace("\n", " ") for e in examples[:5])


def _keyword_pattern(keywords: tuple[str, ...]) -> re.Pattern[str]:
    """Any keyword as a whole word: not preceded or followed by a word character.

    Spaces inside a phrase match any run of whitespace.
    """
    alternatives = sorted(
        (r"\s+".join(re.escape(part) for part in k.split()) for k in keywords),
        key=len,
        reverse=True,
    )
    return re.compile(rf"(?<!\w)(?:{'|'.join(alternatives)})(?!\w)", re.IGNORECASE)


def _rule_rationale(rule: IntentRule, matched: str) -> str:
    said = f"keyword {matched!r}"
    return f"{said} ({rule.description})" if rule.description else said


def _unit(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0.0, norms, 1.0)).astype(np.float32)


def _parse_choice(answer: str, names: list[str]) -> tuple[str, str]:
    """(target, rationale) from the classifier's answer (JSON, possibly fenced)."""
    kept = answer[:_ANSWER_IN_DETAIL]
    try:
        data = json.loads(_unfenced(answer))
    except json.JSONDecodeError as e:
        raise PlanError(f"classifier answer is not JSON: {e}", answer=kept, targets=names) from None
    target = data.get("target") if isinstance(data, dict) else None
    if not isinstance(target, str) or target not in names:
        raise PlanError(
            f"classifier answer names no known target (got {target!r}; "
            f"expected one of {', '.join(names)})",
            answer=kept,
            targets=names,
        )
    rationale = data.get("rationale", "")
    if not isinstance(rationale, str):
        raise PlanError("classifier rationale is not a string", answer=kept, targets=names)
    return target, rationale.strip() or "(the classifier gave no rationale)"


def _unfenced(text: str) -> str:
    """The body of a fenced code block that is the whole answer, else the answer."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        return stripped[stripped.index("\n") + 1 : -3]
    return text


MAX_CLASSIFIERS = 32
"""Intent configurations whose embedded targets a chooser keeps (the least recently used go)."""


class TeamChooser:
    """Routes jobs that name no team, reusing one :class:`IntentClassifier` per configuration."""

    def __init__(self, router: RouterClient) -> None:
        self._router = router
        self._routers: OrderedDict[str, IntentClassifier] = OrderedDict()

    async def choose(
        self,
        job_id: str,
        task: str,
        tenant: str,
        teams: Mapping[str, TeamSpec],
        config: IntentConfig | None,
    ) -> tuple[TeamSpec, IntentChoice]:
        """The team for ``task`` and how it was chosen.

        Raises:
            ConfigError: no teams or no intent configuration, or a target without a team.
            PlanError: the classifier's answer names no target.
        """
        if config is None or not teams:
            raise ConfigError(
                "a job without a team needs teams to choose from and an intent configuration"
            )
        unknown = sorted(set(config.targets) - set(teams))
        if unknown:
            raise ConfigError(f"intent targets without a team: {unknown}", targets=unknown)
        route = await self.route(job_id, task, tenant, config)
        return teams[route.target], route

    async def route(
        self, job_id: str, task: str, tenant: str, config: IntentConfig
    ) -> IntentChoice:
        """The target of ``task`` among ``config``'s, and how it was chosen.

        Raises:
            PlanError: the classifier's answer names no target.
            TroupeError: the classifier's model call failed.
        """
        key = config.model_dump_json()
        router = self._routers.pop(key, None) or IntentClassifier(config)
        self._routers[key] = router
        while len(self._routers) > MAX_CLASSIFIERS:
            self._routers.popitem(last=False)

        route = await router.classify(task, pool_asker(self._router, job_id, tenant))
        log.info("job_routed", job_id=job_id, target=route.target, method=route.method)
        return route
