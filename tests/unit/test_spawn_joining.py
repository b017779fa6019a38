"""A driver joining a cluster while Ray restarts one of its system actors waits for it
(``through_restarts_blocking``, which ``spawn_system`` calls); the real case, a head lost and
started again, is the drill ``tests/reliability/test_head_loss.py``."""

from __future__ import annotations

import pytest
from ray.exceptions import ActorDiedError, ActorUnavailableError

from raytroupe.actors.ray_handles import through_restarts_blocking


def test_calls_are_made_again_while_an_actor_is_restarting():
    made = []

    def calls() -> str:
        made.append(1)
        if len(made) < 3:
            raise ActorUnavailableError("The actor is restarting.", None)
        return "settled"

    assert through_restarts_blocking(calls, within_s=30) == "settled"
    assert len(made) == 3


def test_an_actor_still_restarting_at_the_deadline_or_dead_is_raised():
    def restarting() -> None:
        raise ActorUnavailableError("The actor is restarting.", None)

    with pytest.raises(ActorUnavailableError):
        through_restarts_blocking(restarting, within_s=0.5)

    made = []

    def dead() -> None:
        made.append(1)
        raise ActorDiedError()

    with pytest.raises(ActorDiedError):
        through_restarts_blocking(dead, within_s=30)
    assert made == [1]  # a dead actor is not waited for
