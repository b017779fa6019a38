"""What a delivery POSTs: a Standard Webhooks body, or an A2A push notification.

The body is made once, when the event is journaled, and sent the same on every attempt (the
signature covers it). It tells of the event (its job, place, type and data: an error's code,
an approval's call, an interrupt's question), never the job's answer: the receiver reads that
with its own key (``GET /v1/jobs/{id}``), so a webhook's URL learns no more than that a job of
its tenant moved.
"""

from __future__ import annotations

import datetime
import json
from typing import Any, Final

from raytroupe.protocols import JobEvent

__all__ = ["A2A_STATES", "body_of"]

MAX_DATA_BYTES: Final = 32_768
"""An event's data larger than this (a graph's state at an interrupt) is left out, and said."""

A2A_STATES: Final = {
    "job_submitted": "TASK_STATE_SUBMITTED",
    "subtask_finished": "TASK_STATE_WORKING",
    "approval_decided": "TASK_STATE_WORKING",
    "graph_resumed": "TASK_STATE_WORKING",
    "approval_requested": "TASK_STATE_INPUT_REQUIRED",
    "graph_interrupted": "TASK_STATE_INPUT_REQUIRED",
    "job_succeeded": "TASK_STATE_COMPLETED",
    "job_failed": "TASK_STATE_FAILED",
    "job_cancelled": "TASK_STATE_CANCELED",
}
"""The A2A task state a job is in after each event a push config hears."""


def _when(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, tz=datetime.UTC).isoformat().replace("+00:00", "Z")


def _session(context: str | None) -> str | None:
    try:
        session = json.loads(context or "{}").get("session")
    except (ValueError, AttributeError):
        return None
    return session if isinstance(session, str) else None


def body_of(kind: str, event: JobEvent, tenant: str, context: str | None) -> str:
    """The JSON body a webhook of ``kind`` is sent for ``event`` of a job of ``tenant``.

    ``context``: the job's journaled context (JSON), whose session is an A2A task's context.
    """
    if kind == "a2a":
        return _a2a(event, _session(context) or event.job_id)
    data: dict[str, Any] = dict(event.data)
    if len(json.dumps(data, default=str)) > MAX_DATA_BYTES:
        data = {"omitted": f"the event's data is over {MAX_DATA_BYTES} bytes: read the job"}
    return json.dumps(
        {
            "type": event.type,
            "timestamp": _when(event.at),
            "data": {
                "job_id": event.job_id,
                "seq": event.seq,
                "tenant": tenant,
                "subtask_id": event.subtask_id,
                "session": _session(context),
                "event": data,
            },
        },
        default=str,
        separators=(",", ":"),
    )


def _a2a(event: JobEvent, context_id: str) -> str:
    """A2A's ``StreamResponse`` of a task status update, as its SDK's push sender posts it."""
    status: dict[str, Any] = {"state": A2A_STATES[event.type], "timestamp": _when(event.at)}
    said = event.data.get("error")
    if event.type == "job_failed" and isinstance(said, str):
        status["message"] = {
            "messageId": f"{event.job_id}-status-{event.seq}", "role": "ROLE_AGENT",
            "taskId": event.job_id, "contextId": context_id,
            "parts": [{"text": f"{event.data.get('code', 'job_failed')}: {said}"}],
        }  # fmt: skip
    update = {"taskId": event.job_id, "contextId": context_id, "status": status}
    return json.dumps({"statusUpdate": update}, separators=(",", ":"))
