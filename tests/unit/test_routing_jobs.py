"""Jobs that name no team: routed to one by keyword, similarity or the classifier."""

import pytest
from wiring import build_troupe, order, run

from raytroupe.protocols import AgentSpec, ConfigError, TeamSpec
from raytroupe.protocols.intent import IntentConfig, IntentRule

TEAMS = {
    "billing": TeamSpec(name="billing", agents=(AgentSpec(name="payer", role="clerk"),)),
    "engineering": TeamSpec(name="eng", agents=(AgentSpec(name="fixer", role="dev"),)),
}
ROUTING = IntentConfig(
    targets={
        "billing": "invoices refunds payments charges",
        "engineering": "bugs outages deployments servers",
    },
    rules=(IntentRule(keywords=("invoice",), target="billing"),),
    embedding="hashing",
    similarity_threshold=0.2,
    classifier_model="offline",
)


def routed(task):
    async def main():
        troupe = await build_troupe()
        job_id = await troupe.desk.submit(*order(task, teams=TEAMS, intent=ROUTING))
        result = await troupe.orchestrator.wait(job_id, 10)
        events = await troupe.orchestrator.events(job_id)
        return result, events

    return run(main())


def test_a_keyword_rule_routes_first():
    result, events = routed("Please resend invoice 7.")
    assert (result.route.target, result.route.method) == ("billing", "keyword")
    assert result.team == "billing"
    assert {s.agent for s in result.subtasks} == {"payer"}
    assert [e.type for e in events][:2] == ["job_submitted", "job_routed"]


def test_similarity_routes_a_clear_case():
    result, _ = routed("the servers had outages after deployments")
    assert (result.route.target, result.route.method) == ("engineering", "similarity")
    assert result.route.score is not None
    assert {s.agent for s in result.subtasks} == {"fixer"}


def test_the_classifier_decides_when_similarity_cannot():
    result, _ = routed("hello")
    assert result.route.method == "classifier"
    assert result.route.target in TEAMS


def test_a_job_naming_nothing_with_nothing_registered_is_a_config_error():
    async def main():
        troupe = await build_troupe()
        await troupe.desk.submit(*order("anything"))

    with pytest.raises(ConfigError, match="there is none to route it to"):
        run(main())
