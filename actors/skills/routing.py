"""Routing a job that names no skill and no team: among the tenant's skills and teams.

The targets are the skills and registered teams the tenant may run, each described by its
``intent`` (keywords, description, examples; a team without one by its ``description``).
The cascade is :class:`~raytroupe.actors.desk.intent.IntentClassifier`'s: keyword rules,
then embedding similarity to each target's description and examples, then a model classifier, with
the thresholds of :class:`RoutingConfig`. A skill and a team of the same name: the skill is the
target (the team can still be named).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from raytroupe.actors.skills.config import RoutingConfig
from raytroupe.protocols import ConfigError, TeamSpec
from raytroupe.protocols.intent import IntentConfig, IntentHints, IntentRule
from raytroupe.protocols.skill import SkillSpec

__all__ = ["Targets", "routing_config"]

Targets = dict[str, Literal["skill", "team"]]
"""What each target name is."""


def _described(hints: IntentHints, fallback: str) -> str:
    return hints.description.strip() or fallback.strip()


def routing_config(
    skills: Sequence[SkillSpec], teams: Mapping[str, TeamSpec], config: RoutingConfig
) -> tuple[IntentConfig, Targets]:
    """The intent configuration over ``skills`` and ``teams``, and what each target is.

    Raises:
        ConfigError: there is nothing to route to.
    """
    targets: dict[str, str] = {}
    kinds: Targets = {}
    rules: list[IntentRule] = []
    examples: dict[str, tuple[str, ...]] = {}
    entries: list[tuple[str, Literal["skill", "team"], IntentHints, str]] = [
        (s.name, "skill", s.intent, s.description) for s in skills
    ]
    entries += [
        (name, "team", t.intent, t.description or f"the {name} team ({', '.join(t.roles)})")
        for name, t in teams.items()
    ]
    for name, kind, hints, fallback in entries:
        if name in targets:
            continue  # a skill's name wins over a team's
        targets[name] = _described(hints, fallback)
        kinds[name] = kind
        if hints.keywords:
            rules.append(IntentRule(keywords=hints.keywords, target=name,
                                    description=f"{kind} {name}"))  # fmt: skip
        if hints.examples:
            examples[name] = hints.examples
    if not targets:
        raise ConfigError(
            "the job names no skill and no team, and there is none to route it to: register "
            "a skill or a team (or name one)"
        )
    intent = IntentConfig(
        targets=targets,
        rules=tuple(rules),
        examples=examples,
        similarity_threshold=config.similarity_threshold,
        margin=config.margin,
        classifier_model=config.classifier_model,
        embedding=config.embedding,
    )
    return intent, kinds
