"""A graph state as a pydantic model and a reducer function: code an operator installs."""

from __future__ import annotations

from pydantic import BaseModel


class Review(BaseModel):
    """The state of a review loop."""

    draft: str = ""
    score: int = 0


def keep_longest(current: str | None, new: str) -> str:
    """A reducer: the longer of the two texts."""
    return new if current is None or len(new) > len(current) else current
