"""A conversation across jobs and a knowledge base, offline.

    .venv/bin/python examples/conversation_and_knowledge.py

Two documents (Markdown and HTML, in ``examples/knowledge/``) go into the knowledge base
``ray-docs``, chunked by their headings and embedded with the offline MiniLM; a search
returns passages with the citation an answer gives. Then a session of three jobs with an
agent that is shown the knowledge base's closest passages: the second job's answer cites
the passage it draws on; the third asks about something said in the first, and its answer
comes from the session's history.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from raytroupe import runtime

DOCS = Path(__file__).parent / "knowledge"
TEAM = runtime.Team(
    name="helpdesk",
    planner_model="offline",
    agents=[
        runtime.AgentSpec(
            name="helpdesk-ada",
            role="assistant",
            model="offline",
            memory=runtime.MemoryPolicy(knowledge=("ray-docs",), knowledge_k=2),
        )
    ],
)
TURNS = (
    "My name is Ada and I look after the billing service.",
    "How does Ray Serve add replicas when traffic grows?",
    "Which service do I look after?",
)


def demo(rt: runtime.Runtime, say: Callable[[str], object] = print) -> None:
    """Fill a knowledge base and search it, then hold a conversation; ``say`` each line."""
    if "ray-docs" in {kb.name for kb in rt.knowledge_bases()}:
        rt.drop_knowledge_base("ray-docs")  # the same output on every run
    report = rt.ingest("ray-docs", [DOCS], base=DOCS)
    for doc in report.documents:
        say(f"ingested {doc.source}: {doc.chunks} passages")
    found = rt.search("ray-docs", "How does Serve add replicas when traffic grows?", k=2)
    for passage in found.passages:
        say(f"[{passage.source}#{passage.position}] {passage.section} ({passage.score:.2f})")

    session = rt.session(title="helpdesk")
    for task in TURNS:
        say(f"user: {task}")
        say(f"  answer: {session.ask(task, TEAM, timeout=120)}")
    turns = session.turns()
    say(f"session {session.id}: {len(turns)} turns, {[t.status for t in turns]}")


def main() -> None:
    """Start an embedded Ray, run the demo, stop."""
    rt = runtime.connect(address="local", num_cpus=2, log_level="warning")
    try:
        demo(rt)
    finally:
        rt.shutdown()


if __name__ == "__main__":
    main()
