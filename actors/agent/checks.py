"""An agent's check of its own arithmetic before a final answer is accepted.

A subtask that asks for a computed number (``raytroupe.protocols.task_shape.needs_arithmetic``),
given to an agent with the calculator, must show the calculator's result: a final answer written
without calling it, or one that does not state the value the calculator last returned, gets one
corrective turn (:func:`arithmetic_correction`), and only one of that kind; later turns are
corrected only for slips in new working or the worked example's result copied, up to
:data:`MAX_CORRECTIONS` in all (:func:`next_correction`), and then the answer stands. Small models
answer arithmetic from memory, and wrongly, even with the tool at hand; a program can see that they
did, and say so.

An answer that states only numbers the task's text states too looked them up: it stands
(asked "which breed ... and how long is each wheel aged?" of a passage holding the age and two
other numbers, Qwen 1.5B answered it right, was told to calculate, and answered "552 weeks").

An answer written without the calculator but with its working shown (``48 * 2.35 = 112.80``)
has each step recomputed by the calculator's evaluator (``raytroupe.actors.agent.working``): working
whose every step is right stands, and a step that is wrong is named in the corrective turn
with its value (asked instead to call the tool, Qwen 1.5B called it on one step of a
three-step sum and answered with that step's result).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final, NamedTuple

from raytroupe.actors.agent.working import Step, recomputed, written_steps, wrong_steps
from raytroupe.actors.llm.tool_examples import EXAMPLE_EXPRESSION, EXAMPLE_RESULT
from raytroupe.protocols.task_shape import (
    mentions_number,
    needs_arithmetic,
    numbers_in,
    restates_numbers,
)

__all__ = [
    "CALCULATE_FIRST",
    "MAX_CORRECTIONS",
    "Calculation",
    "arithmetic_correction",
    "copied_example",
    "kept_answer",
    "next_correction",
    "taken_answer",
    "working_slips",
]

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
        return working_slips(answer)
    if not calculated:
        return _working_checked(answer, f"{instructions}\n{context}")
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


_NAMED: Final = 3
"""Wrong steps named in one corrective turn."""


def _working_checked(answer: str, source: str) -> str | None:
    """For an answer made without the calculator: what it is told, if anything.

    None when it only restates numbers of the ``source`` text (a lookup) or when its written
    working is all right, the wrong steps when some are, :data:`CALCULATE_FIRST` when it
    shows no working.
    """
    if restates_numbers(answer, source):
        return None
    if not written_steps(answer):
        return CALCULATE_FIRST
    return working_slips(answer)


def working_slips(answer: str) -> str | None:
    """The wrong steps of the working ``answer`` writes out, named with their values.

    None: every step is right, or it writes none. Any agent's answer is checked so, with the
    calculator tool or without it.
    """
    wrong = [s for s in written_steps(answer) if not s.right]
    if not wrong:
        return None
    named = "; ".join(f"{s.expression} is {s.shown}, not {s.stated}" for s in wrong[:_NAMED])
    return (
        f"The calculator disagrees with your working: {named}. Redo the working from there "
        "with the right values, then give your final answer."
    )


MAX_CORRECTIONS: Final = 3
"""Corrective turns a subtask may have: the first of any kind, the others for slips in new
working or the worked example's result copied."""


def next_correction(  # noqa: PLR0917 - the check's whole input
    instructions: str,
    tools: Collection[str],
    calculated: Sequence[Calculation],
    answer: str,
    context: str,
    corrections: int,
    before: str | None = None,
) -> str | None:
    """What the model is told before ``answer`` is taken, its ``corrections``-th time.

    An answer stating the worked example's result (:func:`copied_example`) is told so, as
    long as corrections are left. The first time: :func:`arithmetic_correction`. After it,
    only a slip in the working the new answer writes out (fixing one step, Qwen 1.5B carried
    the old value into the next: ``54 * 372`` corrected to 20088, then ``20088 * 0.28 =
    5725.44``), up to :data:`MAX_CORRECTIONS` in all, and not a slip the answer told before
    (``before``) writes again: told it, Qwen 1.5B wrote the same step twice more. The
    working is then recomputed as the answer is taken (``working.recomputed``).
    """
    copied = copied_example(answer, f"{instructions}\n{context}", calculated)
    if copied is not None and corrections < MAX_CORRECTIONS:
        return copied
    if corrections == 0:
        return arithmetic_correction(instructions, tools, calculated, answer, context)
    if corrections >= MAX_CORRECTIONS or _repeated(answer, before):
        return None
    return working_slips(answer)


def _repeated(answer: str, before: str | None) -> bool:
    """Whether ``answer`` writes a wrong step that the answer ``before`` it wrote too."""
    if before is None:
        return False
    told = {(s.expression, s.stated) for s in wrong_steps(before)}
    return any((s.expression, s.stated) in told for s in wrong_steps(answer))


def copied_example(answer: str, source: str, calculated: Sequence[Calculation]) -> str | None:
    """What a model is told when ``answer`` states the worked calculator example's result.

    Local models are shown a worked exchange (``raytroupe.actors.llm.tool_examples``) whose answer
    is 903; asked how long a show lasts, Qwen 1.5B answered "903 minutes", and asked for litres of
    paint it called the calculator with the example's own ``24 * 37 + 15``. None when the answer
    does not state 903, or the task's ``source`` text does, or states all the example's numbers (24,
    37, 15), or a calculator call of this subtask returned 903 for an expression other than the
    example's.
    """
    if not mentions_number(answer, EXAMPLE_RESULT) or mentions_number(source, EXAMPLE_RESULT):
        return None
    example = "".join(EXAMPLE_EXPRESSION.split())
    ran = [
        "".join(c.expression.split())
        for c in calculated
        if mentions_number(c.result, EXAMPLE_RESULT)
    ]
    own = set(numbers_in(EXAMPLE_EXPRESSION)) <= set(numbers_in(source))
    if own or any(expression != example for expression in ran):
        return None
    if ran:
        return (
            f"{EXAMPLE_EXPRESSION} is the worked example shown before this task, not this "
            "task. Call the calculator with the numbers of this task, then give your answer."
        )
    return (
        f"{EXAMPLE_RESULT} is the result of the worked example shown before this task, not of "
        "this task. Answer the task you were given."
    )


def kept_answer(answer: str, corrected: str | None) -> str:
    """The answer a subtask keeps after a corrective turn: ``answer``, or the ``corrected`` one.

    The corrected one when ``answer`` states no number and it did: told to check with the
    calculator, Qwen 1.5B answered "To check the result, we can use the calculator tool..."
    and nothing more.
    """
    if corrected is not None and not numbers_in(answer) and numbers_in(corrected):
        return corrected
    return answer


def taken_answer(answer: str, corrected: str | None, source: str) -> tuple[str, list[Step]]:
    """The answer a subtask ends with (:func:`kept_answer`), its working recomputed.

    Corrective turns are spent (or the model wrote a slip it was told again): the wrong
    numbers of its written working are replaced by the calculator's values
    (``working.recomputed``; ``source`` is the task's text, whose numbers are left alone).
    An answer that writes again a slip the ``corrected`` one was told loses to it: told to
    redo ``£215 * 58 + £140 * 7``, Qwen 1.5B wrote that step again and dropped the two
    other answers of the task. Returns the answer and the steps whose numbers were replaced.
    """
    kept = corrected if corrected is not None and _repeated(answer, corrected) else answer
    return recomputed(kept_answer(kept, corrected), source)
