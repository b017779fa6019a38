"""JSON Schema validation whose regular expressions cannot hold the process.

Schemas come from tenants (an inline team's ``output_schema``, an eval suite's
``json_schema`` expectation), MCP servers (tool schemas) and operators; the values they
check come from models. ``jsonschema`` matches ``pattern``, ``patternProperties`` and the
names ``additionalProperties`` looks at with :func:`re.search`, so one catastrophic pattern
(``^(a|aa)+$``) against a crafted answer would stall the orchestrator's event loop for
every tenant. :func:`safe_validator` matches them with the ``regex`` module and a time
limit: a pattern that runs out of time is a validation error (the value fails, closed),
and all the patterns of one unit of work share its deadline (:mod:`raytroupe.protocols.bounded`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final, cast

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from referencing import Registry

from raytroupe.protocols.bounded import PATTERN_TIMEOUT_S, search
from raytroupe.protocols.schema_checks import guarded, multiple_of

__all__ = ["PATTERN_TIMEOUT_S", "safe_validator"]


def _search(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` is found in ``text``; None if it took too long.

    Raises:
        WorkLimitExceeded: the unit of work this runs in is out of time
            (:func:`raytroupe.protocols.bounded.bounded`).
    """
    return search(pattern, text)


def _too_slow(pattern: str) -> ValidationError:
    return ValidationError(f"pattern {pattern!r} took over {PATTERN_TIMEOUT_S} s: refused")


def _pattern(
    validator: Any,
    pattern: str,
    instance: Any,
    schema: Mapping[str, Any],  # noqa: ARG001 - jsonschema's keyword signature
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    found = _search(pattern, instance)
    if found is None:
        yield _too_slow(pattern)
    elif not found:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any,
    patterns: Mapping[str, Any],
    instance: Any,
    schema: Mapping[str, Any],  # noqa: ARG001 - jsonschema's keyword signature
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            found = _search(pattern, key)
            if found is None:
                yield _too_slow(pattern)
            elif found:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    # a name a pattern could not decide on in time counts as matched by none: refused
    extras = [k for k in instance if k not in named and not any(_search(p, k) for p in patterns)]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        listed = ", ".join(repr(e) for e in sorted(extras, key=str))
        if patterns:  # worded as jsonschema words it
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(patterns))
            yield ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


_NOTHING_REMOTE: Final = Registry()
"""No resource but the schema itself (and the drafts' metaschemas): nothing is retrieved."""

_SafeValidator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    validators={
        # no keyword raises on a value it cannot check: the value fails instead
        **{name: guarded(keyword) for name, keyword in Draft202012Validator.VALIDATORS.items()},
        "multipleOf": guarded(multiple_of),
        "pattern": guarded(_pattern),
        "patternProperties": guarded(_pattern_properties),
        "additionalProperties": guarded(_additional_properties),
    },
)


def safe_validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A Draft 2020-12 validator of ``schema`` whose patterns are matched with a time limit.

    ``unevaluatedProperties`` still consults ``patternProperties`` with :mod:`re`: schemas
    combining the two are refused where schemas are accepted
    (:func:`raytroupe.protocols.output_schema.check_output_schema`).

    No keyword raises on a value (:func:`raytroupe.protocols.schema_checks.guarded`), and a ``$ref``
    to another document is never fetched (jsonschema's default would, with ``urlopen``):
    it fails the value.
    """
    return cast("Draft202012Validator", _SafeValidator(schema, registry=_NOTHING_REMOTE))
