"""What a job's caller reads names its inline agents as it wrote them (``as_written``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from raytroupe.protocols import JobEvent, SubtaskResult, UsageRow, as_written, scoped_name


def _subtask(agent: str, output: str) -> SubtaskResult:
    return SubtaskResult(
        id="s1", role="analyst", instructions="x", agent=agent, status="succeeded", output=output
    )


def test_the_tenants_own_scope_goes_in_fields_and_in_sentences_and_no_other_tenants():
    ada, theirs = scoped_name("acme", "ada"), scoped_name("globex", "ada")
    record = {
        "subtasks": [_subtask(ada, f"asked {theirs}; {ada} answered")],
        "by": (ada, 3),
        ada: {"agent": ada},
    }
    shown = as_written(record, "acme")
    assert shown["subtasks"][0].agent == "ada"
    assert shown["subtasks"][0].output == f"asked {theirs}; ada answered"
    assert shown["by"] == ("ada", 3)
    assert shown["ada"] == {"agent": "ada"}
    assert as_written(record, "globex")["subtasks"][0].output == f"asked ada; {ada} answered"


def test_what_has_nothing_to_change_is_the_same_object_and_nothing_is_changed_in_place():
    row = UsageRow(job_id="j", agent="ada", model="m", deployment="d", provider="offline")
    assert as_written(row, "acme") is row
    event = JobEvent(
        job_id="j", seq=1, type="subtask_finished", at=1.0, data={"agent": scoped_name("acme", "a")}
    )
    shown = as_written(event, "acme")
    assert shown.data == {"agent": "a"}
    assert event.data == {"agent": scoped_name("acme", "a")}  # the record kept is untouched
    assert as_written(None, "acme") is None


@given(
    tenant=st.text(max_size=20),
    name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,20}", fullmatch=True),
)
def test_a_scoped_name_reads_back_as_written_for_any_tenant(tenant, name):
    assert as_written(scoped_name(tenant, name), tenant) == name
    assert as_written(name, tenant) == name
