"""Skills end to end on an embedded local Ray, with the offline model (no keys, no network).

The orchestrator loads ``examples/skills`` (and would reload a file you edit while it runs);
one job names its skill and gives a structured input, the others name nothing and are routed
to a skill by the intent cascade. Every result carries the standard output envelope.

    .venv/bin/python examples/skills_demo.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from raytroupe import runtime

HERE = Path(__file__).parent


def main() -> None:
    """Run three skill jobs and print their routes and standard outputs."""
    with tempfile.TemporaryDirectory(prefix="troupe-skills-") as tmp:
        root = Path(tmp)
        rt = runtime.connect(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            log_level="warning",
            journal=root / "journal.sqlite",
            tools_config=runtime.ToolsConfig(state_dir=root / "state", scratch_root=root / "s"),
            memory_config=runtime.MemoryConfig(path=root / "memory"),
            skills=HERE / "skills",
        )
        try:
            # the team skill runs the research team: register it, then apply the skill again
            rt.put_team(runtime.Team.from_yaml(HERE / "teams" / "research.yaml").spec())
            rt.put_skill(HERE / "skills" / "research-brief.yaml")
            for info in rt.skills().skills:
                print(f"skill {info.name}@{info.version} ({info.execution_mode})")
            for problem in rt.skill_problems():
                print(f"not loaded: {problem.file}: {'; '.join(problem.problems)}")

            invoice = "Invoice INV-2024-117 from Acme Tools: total 1,250.00 EUR, due July 15, 2025."
            review = "Is this review positive or negative? 'A negative surprise: it broke.'"
            jobs = [
                rt.submit(
                    "Extract the invoice fields.",
                    skill="invoice-fields",
                    input={"text": invoice, "currency": "EUR"},
                ),
                rt.submit(review),  # no team, no skill: routed
                rt.submit("What is 1250 * 0.2 + 17?"),
            ]
            for job in jobs:
                result = job.result(timeout=120)
                route = result.route
                how = f"routed by {route.method} to {route.target}" if route else "named"
                out = result.output
                if out is None:  # only a job that never finished lacks one
                    raise SystemExit(f"job {result.job_id} has no output")
                print(f"\n{out.skill}@{out.version}: {result.status}, {how}")
                if out.quality is not None:
                    print(f"  quality: passed={out.quality.passed} score={out.quality.score}")
                print(f"  data: {json.dumps(out.data)}" if out.data else f"  text: {out.text}")
        finally:
            rt.shutdown()


if __name__ == "__main__":
    main()
