"""The gateway's retry loop once a stream has started: no retry after a partial delivery."""

import pytest
from llm_fakes import Rig
from wiring import run

from raytroupe.protocols import LLMDelta, StreamInterrupted


def _streaming_rig() -> Rig:
    rig = Rig()
    rig.deploy("a", StreamInterrupted("cut"), deltas=("par",))
    rig.deploy("b", "whole answer", deltas=("whole", " answer"))
    rig.route("main", "a", "b")
    return rig


def test_a_stream_that_delivered_content_then_failed_is_not_retried():
    async def main():
        rig = _streaming_rig()
        seen: list[LLMDelta] = []

        async def sink(delta: LLMDelta) -> None:
            seen.append(delta)

        with pytest.raises(StreamInterrupted):
            await rig.ask("main", stream=True, on_delta=sink)
        assert rig.log == ["a"]
        assert [d.text for d in seen] == ["par"]

    run(main())


def test_a_partial_stream_is_retried_when_the_request_allows_it():
    async def main():
        rig = _streaming_rig()
        seen: list[str] = []

        async def sink(delta: LLMDelta) -> None:
            seen.append(delta.text)

        response = await rig.ask("main", stream=True, retry_partial_stream=True, on_delta=sink)
        assert (response.text, response.deployment) == ("whole answer", "b")
        assert rig.log == ["a", "b"]
        assert seen == ["par", "whole", " answer"]

    run(main())


def test_a_stream_that_failed_before_any_delta_is_retried():
    async def main():
        rig = Rig()
        rig.deploy("a", StreamInterrupted("no content"))
        rig.deploy("b", "answer", deltas=("answer",))
        rig.route("main", "a", "b")
        response = await rig.ask("main", stream=True)  # no sink: deltas still count
        assert response.deployment == "b"
        assert rig.log == ["a", "b"]

    run(main())


def test_a_partial_stream_counts_even_without_a_delta_sink():
    async def main():
        rig = _streaming_rig()
        with pytest.raises(StreamInterrupted):
            await rig.ask("main", stream=True)
        assert rig.log == ["a"]

    run(main())
