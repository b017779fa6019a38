"""Guardrails: one refuses a job's input, one redacts personal data before any agent sees it.

Usage: python examples/guardrails.py

Starts raytroupe on an embedded local Ray (the deterministic offline model: no keys, no
network), sets two guardrails as an admin would (``troupe guardrails set`` and ``PUT
/v1/guardrails/{name}`` take the same spec), and runs three jobs: one the first guardrail
refuses, one whose task the second redacts, and one neither touches. Then it prints the
decisions (``troupe guardrails decisions``), which name the rule and the kind of match,
never the text matched.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import raytroupe
from raytroupe.protocols import GuardrailTripped

TEAM = raytroupe.Team(
    name="support",
    planner_model="offline",
    agents=[raytroupe.AgentSpec(name="helper", role="writer", instructions="Answer briefly.")],
)
NO_SECRETS = {
    "description": "Refuse requests for credentials.",
    "stages": ["input"],
    "rules": [{"kind": "keywords", "words": ["password", "api key"]}],
}
NO_PII = {
    "description": "Personal data never reaches a model, a tool or an answer.",
    "stages": ["input", "tool_call", "tool_result", "output"],
    "action": "redact",
    "rules": [{"kind": "pii", "entities": ["email", "phone", "credit_card"]}],
    "applies_to": {"teams": ["support"]},
}


def main() -> None:
    """Set the guardrails, run the three jobs, print what was decided."""
    with tempfile.TemporaryDirectory(prefix="troupe-guardrails-") as tmp:
        state = Path(tmp)
        rt = raytroupe.connect(
            address="local",  # a Ray of its own, even if another runs on this machine
            num_cpus=2,
            include_dashboard=False,
            log_level="warning",
            journal=state / "journal.sqlite",
            tools_config=raytroupe.ToolsConfig(
                state_dir=state / "tools", scratch_root=state / "scratch"
            ),
            memory_config=raytroupe.MemoryConfig(path=state / "memory"),
        )
        try:
            for name, spec in (("no-secrets", NO_SECRETS), ("no-pii", NO_PII)):
                info = rt.put_guardrail(name, spec)
                print(f"guardrail {info.name} v{info.version}: {info.spec.description}")
            try:
                rt.submit("What is the admin password of the billing database?", team=TEAM)
            except GuardrailTripped as refused:
                print(f"refused: {refused}")
            job = rt.submit(
                "Write a two-line reply to jane.doe@example.com, who called from "
                "+1 415 555 0132 about a refund.",
                team=TEAM,
            )
            result = job.result(timeout=120)
            print(f"job {job.job_id}: {result.status}")
            print(f"  the agents were asked: {rt.summary(job.job_id).task}")
            print(f"  answer: {result.answer.splitlines()[0]}")
            clean = rt.submit("Write a one-line thank-you note.", team=TEAM).result(timeout=120)
            print(f"a job with nothing to guard: {clean.status}")
            print("decisions, newest first:")
            for record in rt.guardrail_decisions():
                d = record.decision
                print(f"  {d.guardrail} v{d.version} rule {d.rule} {d.action} the {d.stage} "
                      f"of {record.job_id or '(no job: refused)'}: {d.reason}")  # fmt: skip
        finally:
            rt.shutdown()


if __name__ == "__main__":
    main()
