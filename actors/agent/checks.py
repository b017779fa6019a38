"""An agent's check of its own arithmetic before a final answer is accepted.

A subtask that asks for a computed number (``protocols.task_shape.needs_arithmetic``), given
to an agent with the calculator, must show the calculator's result: a final answer written
without calling it, or one that does not state the value the calculator last returned, gets
one corrective turn (:func:`arithmetic_correction`), and only one; whatever the model answers
then is the answer. Small models answer arithmetic from memory, and wrongly, even with the
tool at hand; a program can see that they did, and say so once.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final, NamedTuple

from raytroupe.protocols.task_shape import mentions_number, needs_arithmetic, numbers_in

__all__ = ["CALCULATE_FIRST", "Calculation", "arithmetic_correction"]

CALCULATE_FIRST: Final = (
    "Check that with the calculator before you answer: call the calculator tool with the "
    "arithmetic expression, then give your final answer with its result."
)


class Calculation(NamedTuple):
    """One calculator call of a subtask: what it was asked, what it answered, whether it could."""

    expression: str
    result: str
    ok: bool = True


_UNREAD: Final = ("not an arithmetic expression", "unsupported element")
"""How the calculator's errors about an expression's form begin (others, like division by
zero, the model can only report)."""


def arithmetic_correction(
    instructions: str,
    tools: Collection[str],
    calculated: Sequence[Calculation],
    answer: str,
    context: str = "",
) -> str | None:
    """What the model is told before its answer is accepted (None: the answer stands).

    ``context`` is the job's text the instructions come with (numbers may be there).
    ``calculated`` holds the subtask's calculator calls so far, oldest first. A last call
    the calculator could not read (its expression written with words or units) is asked for
    again, in numbers and operators; one that failed otherwise (division by zero) stands.
    """
    if "calculator" not in tools or not needs_arithmetic(instructions, context):
        return None
    if not calculated:
        return CALCULATE_FIRST
    expression, result, ok = calculated[-1]
    if not ok:
        if not any(why in result for why in _UNREAD):
            return None
        return (
            f"The calculator could not read {expression!r}. Call it again with numbers and "
            "+ - * / ( ) only, e.g. (12.5 * 4 + 3) * 1.08, then give your final answer with "
            "its result."
        )
    values = numbers_in(result)
    if len(values) != 1 or mentions_number(answer, values[0]):
        return None
    return (
        f"The calculator returned {result} for {expression}. Give your final answer with that "
        "result."
    )
