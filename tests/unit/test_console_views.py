"""What the console reads of jobs, in process (no journal): jobs list, live trace, waiting work."""

from test_approvals import held_job, script
from wiring import build_troupe, run

from protocols import JobNotFound


def test_a_held_job_is_listed_traced_and_waited_on_for_its_tenant_only():
    async def main():
        troupe = await build_troupe({"m": script()})
        orchestrator = troupe.orchestrator
        job_id, asked = await held_job(troupe, [])
        lines = await orchestrator.summaries(tenant="default")
        others = await orchestrator.summaries(tenant="globex")
        line = await orchestrator.summary(job_id, tenant="default")
        trace = await orchestrator.trace(job_id, tenant="default")
        calls, inputs = await orchestrator.waiting(tenant="default")
        theirs, _ = await orchestrator.waiting(tenant="globex")
        try:
            await orchestrator.trace(job_id, tenant="globex")
            stolen = None
        except JobNotFound as exc:
            stolen = exc
        await orchestrator.decide(job_id, asked.data["approval_id"], approved=True)
        result = await orchestrator.wait(job_id, 10)
        done = await orchestrator.summary(job_id)
        final = await orchestrator.trace(job_id)
        return (
            job_id,
            lines,
            others,
            line,
            trace,
            calls,
            inputs,
            theirs,
            stolen,
            result,
            done,
            final,
        )

    job_id, lines, others, line, trace, calls, inputs, theirs, stolen, result, done, final = run(
        main()
    )
    assert [x.id for x in lines] == [job_id]
    assert others == []
    assert (line.status, line.team, line.task, line.cost_usd) == (
        "awaiting_approval", "pay", "Pay the invoice.", None
    )  # fmt: skip
    assert trace[0].kind == "job"
    assert trace[0].attributes["status"] == "awaiting_approval"
    assert trace[0].end >= trace[0].start
    ((held_job_id, request),) = calls
    assert (held_job_id, request.tool, request.arguments) == (job_id, "pay", {"amount": 120})
    assert (inputs, theirs) == ([], [])
    assert isinstance(stolen, JobNotFound)
    assert result.status == "succeeded"
    assert (done.status, done.subtasks, done.finished_at) == (
        "succeeded", 1, result.timings.finished_at
    )  # fmt: skip
    assert final == result.trace
    (tool,) = [s for s in final if s.kind == "tool_call"]
    assert tool.attributes["arguments"] == '{"amount": "120"}'  # as the model wrote them
    assert tool.attributes["result"] == '{"paid": 120}'  # the sandbox coerced the text
