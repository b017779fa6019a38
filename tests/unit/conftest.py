"""Unit-test fixtures: pure, fast, and never a Ray cluster."""

from __future__ import annotations

import time
from typing import Any

import pytest

from raytroupe.protocols import (
    Ack,
    ApprovalDecision,
    ApprovalRequest,
    CancelJob,
    Cancelled,
    ChatMessage,
    ErrorCode,
    ErrorPayload,
    Event,
    Handoff,
    JobEnded,
    KnowledgeQuery,
    LLMDelta,
    LLMDeltas,
    LLMRequest,
    LLMResponse,
    MemoryHit,
    MemoryHits,
    MemoryQuery,
    MemoryWrite,
    Note,
    Notes,
    NotesQuery,
    NoteWrite,
    Passage,
    Passages,
    SubtaskTaken,
    TaskRequest,
    TaskResult,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.spend import SpendAlert


@pytest.fixture(autouse=True)
def _forbid_ray_init(monkeypatch):
    import ray  # noqa: PLC0415 - imported lazily so collecting unit tests stays cheap

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("unit tests must not start Ray")

    monkeypatch.setattr(ray, "init", refuse)


def _samples() -> dict[str, Any]:
    now = time.time()
    error = ErrorPayload(
        code=ErrorCode.TOOL, message="tool exploded", retryable=False, detail={"tool": "search"}
    )
    call = ToolCall(call_id="call-1", tool="search", arguments={"q": "ray actors", "k": 3})
    return {
        "task_request": TaskRequest(
            task_id="t1",
            instructions="Summarize the findings.",
            job=JobContext(request="Write a report"),
            inputs={"t0": "earlier output"},
            max_turns=3,
        ),
        "task_result": TaskResult(
            task_id="t1",
            agent="writer-1",
            status="failed",
            output="partial",
            error=error,
            turns=2,
            tool_calls=1,
            stop_reason="error",
            providers=("offline",),
            usage=Usage(prompt_tokens=10, completion_tokens=5, cost_usd=0.25, calls=2),
            started_at=now - 1.5,
            finished_at=now,
        ),
        "llm_request": LLMRequest(
            model="default",
            messages=(
                ChatMessage(role="system", content="Be brief."),
                ChatMessage(role="user", content="héllo ✓"),
                ChatMessage(role="assistant", tool_calls=(call,)),
                ChatMessage(role="tool", content="[]", tool_call_id="call-1"),
            ),
            tools=(ToolSpec(name="search", description="Searches."),),
            tool_choice="required",
            response_format={"type": "object"},
            temperature=0.5,
            max_tokens=128,
            stop=("END",),
            purpose="plan",
        ),
        "llm_response": LLMResponse(
            text="done",
            tool_calls=(call,),
            finish_reason="tool_calls",
            usage=Usage(prompt_tokens=3, completion_tokens=4, calls=1),
            model="default",
            provider="offline",
            latency_s=0.01,
        ),
        "tool_call": call,
        "tool_result": ToolResult(
            call_id="call-1",
            tool="search",
            ok=True,
            data={"hits": [1, 2.5, "three", None, True], "nested": {"a": []}},
            metadata={"elapsed_s": 0.2},
        ),
        "event": Event(name="token", data={"text": "hi", "index": 7}),
        "memory_write": MemoryWrite(
            text="Ada prefers metric units.", importance=0.8, tags=("pref",)
        ),
        "memory_query": MemoryQuery(query="units?", k=3, tags=("pref",)),
        "memory_hits": MemoryHits(
            hits=(
                MemoryHit(
                    id="m1",
                    text="Ada prefers metric units.",
                    score=0.9,
                    similarity=0.8,
                    importance=0.8,
                    created_at=now,
                    agent="ada",
                    tags=("pref",),
                ),
            )
        ),
        "note_write": NoteWrite(text="The code word is HERON.", agent="ada"),
        "notes_query": NotesQuery(limit=10),
        "notes": Notes(notes=(Note(id="n1", text="Check the tide.", agent="bob", created_at=now),)),
        "knowledge_query": KnowledgeQuery(kb="handbooks", query="leave policy?", k=3),
        "passages": Passages(
            kb="handbooks",
            passages=(
                Passage(
                    text="Staff get 25 days of leave.",
                    source="hr/leave.md",
                    position=2,
                    section="Policies > Leave",
                    score=0.71,
                    metadata={"team": "hr"},
                ),
            ),
        ),
        "approval_request": ApprovalRequest(
            approval_id="a1", task_id="s1", agent="clerk", tool="pay", arguments={"amount": 3}
        ),
        "approval_decision": ApprovalDecision(approval_id="a1", approved=False, reason="no"),
        "cancel_job": CancelJob(),
        "cancelled": Cancelled(stopped=2),
        "job_ended": JobEnded(),
        "ack": Ack(),
        "llm_deltas": LLMDeltas(
            agent="ada",
            deltas=(LLMDelta(text="he"), LLMDelta(tool_call_index=0, tool_name="f", arguments="{")),
        ),
        "subtask_taken": SubtaskTaken(task_id="s1", agent="ada"),
        "spend_alert": SpendAlert(
            limit="daily",
            tenant="acme",
            window="d2026-12-07",
            threshold=0.8,
            measure="usd",
            spent=8.0,
            allowed=10.0,
            hard=True,
        ),
        "handoff": Handoff(call_id="call-2", to_agent="grace", output="Grace's answer."),
        "error": error,
    }


@pytest.fixture
def sample_payloads() -> dict[str, Any]:
    return _samples()


@pytest.fixture
def keep():
    """``keep(store)``: the store, closed at the end of the test (its pool's threads too)."""
    stores = []
    yield lambda store: stores.append(store) or store
    for store in stores:
        store.close()
