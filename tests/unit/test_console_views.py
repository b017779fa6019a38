"""What the console reads of jobs, in process (no journal): jobs list, live trace, waiting work."""

from test_approvals import held_job, script
from wiring import build_troupe, run

from raytroupe.protocols import JobNotFound, JobsQuery


def test_a_held_job_is_listed_traced_and_waited_on_for_its_tenant_only():
    async def main():
        troupe = await build_troupe({"m": script()})
        orchestrator = troupe.orchestrator
        job_id, asked = await held_job(troupe, [])
        seen = {"job_id": job_id}
        seen["lines"] = await troupe.desk.summaries("default", JobsQuery())
        seen["others"] = await troupe.desk.summaries("globex", JobsQuery())
        seen["filtered"] = [
            [x.id for x in await troupe.desk.summaries("default", JobsQuery(**f))]
            for f in ({"status": "live"}, {"status": "succeeded"}, {"text": "INVOICE"},
                      {"text": "nothing like it"})
        ]  # fmt: skip
        seen["line"] = await orchestrator.summary(job_id, tenant="default")
        seen["trace"] = await orchestrator.trace(job_id, tenant="default")
        seen["calls"], seen["inputs"] = await orchestrator.waiting(tenant="default")
        seen["theirs"], _ = await orchestrator.waiting(tenant="globex")
        try:
            await orchestrator.trace(job_id, tenant="globex")
        except JobNotFound as exc:
            seen["stolen"] = exc
        await orchestrator.decide(job_id, asked.data["approval_id"], approved=True)
        seen["result"] = await orchestrator.wait(job_id, 10)
        seen["done"] = await orchestrator.summary(job_id)
        seen["final"] = await orchestrator.trace(job_id)
        return seen

    seen = run(main())
    job_id, line, result = seen["job_id"], seen["line"], seen["result"]
    assert [x.id for x in seen["lines"]] == [job_id]
    assert seen["others"] == []
    assert seen["filtered"] == [[job_id], [], [job_id], []]
    assert (line.status, line.team, line.task, line.cost_usd) == (
        "awaiting_approval", "pay", "Pay the invoice.", None
    )  # fmt: skip
    root = seen["trace"][0]
    assert (root.kind, root.attributes["status"]) == ("job", "awaiting_approval")
    assert root.end >= root.start
    ((held_job_id, request),) = seen["calls"]
    assert (held_job_id, request.tool, request.arguments) == (job_id, "pay", {"amount": 120})
    assert (seen["inputs"], seen["theirs"]) == ([], [])
    assert isinstance(seen.get("stolen"), JobNotFound)
    assert result.status == "succeeded"
    done = seen["done"]
    assert (done.status, done.subtasks, done.finished_at) == (
        "succeeded", 1, result.timings.finished_at
    )  # fmt: skip
    assert seen["final"] == result.trace
    (tool,) = [s for s in seen["final"] if s.kind == "tool_call"]
    assert tool.attributes["arguments"] == '{"amount": "120"}'  # as the model wrote them
    assert tool.attributes["result"] == '{"paid": 120}'  # the sandbox coerced the text
