"""The team catalog (put, update, delete teams and agents; persisted) and job attachments."""

import base64

import pytest
from pydantic import ValidationError
from wiring import control_plane, run

from raytroupe.actors import LocalRouterClient, MessageRouter
from raytroupe.actors.desk.catalog import TeamCatalog
from raytroupe.actors.orchestrator.jobs import Job
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.shards import Admitted
from raytroupe.protocols import (
    AgentNotFound,
    AgentSpec,
    Attachment,
    ConfigError,
    Conflict,
    ErrorCode,
    PlannedSubtask,
    TeamNotFound,
    TeamSpec,
)
from raytroupe.protocols.inputs import with_files
from raytroupe.protocols.job_context import JobContext
from raytroupe.runtime import Team


class Provisioner:
    """Records what the catalog asks for; refuses teams while ``refusal`` is set."""

    def __init__(self):
        self.provisioned = []
        self.retired = []
        self.refusal = None

    async def provision(self, team):
        if self.refusal is not None:
            raise self.refusal
        self.provisioned.append(team)

    async def retire(self, names):
        self.retired.append(list(names))


def _team(name="research", *agents, **fields):
    specs = agents or (AgentSpec(name="ada", role="researcher"),)
    return TeamSpec(name=name, agents=specs, **fields)


ADA = AgentSpec(name="ada", role="researcher")
GRACE = AgentSpec(name="grace", role="researcher")
WENDY = AgentSpec(name="wendy", role="writer")


def _catalog(journal=None):
    provisioner = Provisioner()
    return TeamCatalog(journal if journal is not None else Journal(":memory:"), provisioner), (
        provisioner
    )


def _retired(provisioner):
    return [name for names in provisioner.retired for name in names]


def _job(team, *, registered):
    return Job(
        id="j1",
        context=JobContext(request="t"),
        team=team,
        tenant="default",
        submitted_at=0.0,
        registered=registered,
    )


# put and delete


def test_put_creates_then_updates():
    async def scenario():
        catalog, provisioner = _catalog()
        first = _team("research", ADA)
        second = _team("research", ADA, GRACE)
        created = await catalog.put(first)
        updated = await catalog.put(second)
        return catalog, provisioner, created, updated, first, second

    catalog, provisioner, created, updated, first, second = run(scenario())
    assert (created, updated) == (True, False)
    assert catalog.teams() == {"research": second}
    assert catalog.team("research") == second
    assert provisioner.provisioned == [first, second]
    assert _retired(provisioner) == []


def test_put_with_create_refuses_an_existing_name():
    async def scenario():
        catalog, provisioner = _catalog()
        await catalog.put(_team("research", ADA))
        with pytest.raises(Conflict, match="'research' already exists"):
            await catalog.put(_team("research", GRACE), create=True)
        return catalog, provisioner

    catalog, provisioner = run(scenario())
    assert catalog.team("research").agents == (ADA,)
    assert len(provisioner.provisioned) == 1


def test_put_refuses_an_agent_name_another_team_owns():
    async def scenario():
        catalog, provisioner = _catalog()
        await catalog.put(_team("research", ADA))
        with pytest.raises(Conflict, match="ada") as caught:
            await catalog.put(_team("writing", WENDY, AgentSpec(name="ada", role="writer")))
        return catalog, provisioner, caught.value

    catalog, provisioner, error = run(scenario())
    assert error.detail == {"agents": ["ada"], "teams": ["research"]}
    assert list(catalog.teams()) == ["research"]
    assert [t.name for t in provisioner.provisioned] == ["research"]


def test_a_team_the_provisioner_refuses_leaves_the_catalog_unchanged():
    async def scenario():
        catalog, provisioner = _catalog()
        await catalog.put(_team("research", ADA))
        provisioner.refusal = ConfigError("model 'missing' is not served")
        with pytest.raises(ConfigError, match="missing"):
            await catalog.put(_team("research", ADA, AgentSpec(name="eve", role="x")))
        with pytest.raises(ConfigError, match="missing"):
            await catalog.put(_team("writing", WENDY))
        return catalog, provisioner

    catalog, provisioner = run(scenario())
    assert catalog.teams() == {"research": _team("research", ADA)}
    assert _retired(provisioner) == []


def test_an_update_retires_only_the_agents_it_dropped():
    async def scenario():
        catalog, provisioner = _catalog()
        await catalog.put(_team("research", ADA, GRACE, WENDY))
        ada_changed = AgentSpec(name="ada", role="researcher", instructions="Be thorough.")
        await catalog.put(_team("research", ada_changed, AgentSpec(name="hopper", role="writer")))
        return catalog, provisioner

    catalog, provisioner = run(scenario())
    assert provisioner.retired == [["grace", "wendy"]]
    assert [a.name for a in catalog.team("research").agents] == ["ada", "hopper"]


def test_delete_retires_every_agent_and_forgets_the_team():
    async def scenario():
        catalog, provisioner = _catalog()
        team = _team("research", ADA, GRACE)
        await catalog.put(team)
        await catalog.put(_team("writing", WENDY))
        deleted = await catalog.delete("research")
        with pytest.raises(TeamNotFound, match="research"):
            await catalog.delete("research")
        return catalog, provisioner, team, deleted

    catalog, provisioner, team, deleted = run(scenario())
    assert deleted == team
    assert provisioner.retired == [["ada", "grace"]]
    assert list(catalog.teams()) == ["writing"]
    with pytest.raises(TeamNotFound):
        catalog.team("research")


def test_delete_of_an_unknown_team_is_team_not_found():
    catalog, provisioner = _catalog()
    with pytest.raises(TeamNotFound) as caught:
        run(catalog.delete("ghosts"))
    assert caught.value.detail == {"team": "ghosts"}
    assert _retired(provisioner) == []


def test_a_deleted_teams_agent_names_are_free_again():
    async def scenario():
        catalog, _ = _catalog()
        await catalog.put(_team("research", ADA))
        await catalog.delete("research")
        return await catalog.put(_team("other", AgentSpec(name="ada", role="writer")))

    assert run(scenario()) is True


# agents


def test_put_agent_adds_then_updates_in_place_provisioning_the_whole_team():
    async def scenario():
        catalog, provisioner = _catalog()
        await catalog.put(_team("research", ADA, WENDY))
        added = await catalog.put_agent("research", GRACE)
        grace2 = AgentSpec(name="grace", role="researcher", model="big")
        updated = await catalog.put_agent("research", grace2)
        return catalog, provisioner, added, updated, grace2

    catalog, provisioner, added, updated, grace2 = run(scenario())
    assert (added, updated) == (True, False)
    assert catalog.team("research").agents == (ADA, WENDY, grace2)
    assert [t.agents for t in provisioner.provisioned] == [
        (ADA, WENDY),
        (ADA, WENDY, GRACE),
        (ADA, WENDY, grace2),
    ]
    assert _retired(provisioner) == []


def test_put_agent_keeps_the_teams_other_settings():
    async def scenario():
        catalog, _ = _catalog()
        await catalog.put(_team("research", ADA, max_parallel=3, planner_model="p"))
        await catalog.put_agent("research", GRACE)
        return catalog.team("research")

    team = run(scenario())
    assert (team.max_parallel, team.planner_model) == (3, "p")


def test_put_agent_refusals():
    async def scenario():
        catalog, provisioner = _catalog()
        await catalog.put(_team("research", ADA))
        await catalog.put(_team("writing", WENDY))
        with pytest.raises(TeamNotFound):
            await catalog.put_agent("ghosts", GRACE)
        with pytest.raises(Conflict, match="already has an agent 'ada'"):
            await catalog.put_agent("research", ADA, create=True)
        with pytest.raises(Conflict, match="wendy"):
            await catalog.put_agent("research", AgentSpec(name="wendy", role="researcher"))
        provisioner.refusal = ConfigError("no such tool")
        with pytest.raises(ConfigError, match="no such tool"):
            await catalog.put_agent("research", GRACE)
        return catalog, provisioner

    catalog, provisioner = run(scenario())
    assert catalog.team("research").agents == (ADA,)
    assert catalog.team("writing").agents == (WENDY,)
    assert len(provisioner.provisioned) == 2


def test_delete_agent_removes_and_retires_only_that_agent():
    async def scenario():
        catalog, provisioner = _catalog()
        await catalog.put(_team("research", ADA, GRACE))
        info = await catalog.delete_agent("grace")
        return catalog, provisioner, info

    catalog, provisioner, info = run(scenario())
    assert (info.name, info.team, info.role) == ("grace", "research", "researcher")
    assert catalog.team("research").agents == (ADA,)
    assert provisioner.retired == [["grace"]]
    assert provisioner.provisioned[-1].agents == (ADA,)


def test_delete_agent_of_an_unknown_agent_is_agent_not_found():
    async def scenario():
        catalog, _ = _catalog()
        await catalog.put(_team("research", ADA))
        with pytest.raises(AgentNotFound) as caught:
            await catalog.delete_agent("nobody")
        return caught.value

    assert run(scenario()).detail == {"agent": "nobody"}


def test_deleting_a_teams_last_agent_is_refused_and_nothing_changes():
    async def scenario():
        catalog, provisioner = _catalog()
        await catalog.put(_team("research", ADA))
        with pytest.raises(ConfigError, match="'research' would not be valid"):
            await catalog.delete_agent("ada")
        return catalog, provisioner

    catalog, provisioner = run(scenario())
    assert catalog.team("research").agents == (ADA,)
    assert len(provisioner.provisioned) == 1
    assert _retired(provisioner) == []


def test_deleting_the_only_agent_of_a_role_the_teams_plan_needs_is_refused():
    # delete_agent documents ConfigError when "the team needs it (a plan or graph names its
    # role)": the fixed plan below cannot run without a writer
    plan = (
        PlannedSubtask(id="research", role="researcher", instructions="Research {task}."),
        PlannedSubtask(
            id="write", role="writer", instructions="Write it up.", depends_on=("research",)
        ),
    )

    async def scenario():
        catalog, provisioner = _catalog()
        await catalog.put(_team("research", ADA, WENDY, plan=plan))
        with pytest.raises(ConfigError):
            await catalog.delete_agent("wendy")
        return catalog, provisioner

    catalog, provisioner = run(scenario())
    assert catalog.team("research").agents == (ADA, WENDY)
    assert _retired(provisioner) == []


def test_agents_lists_every_registered_agent_with_its_team():
    async def scenario():
        catalog, _ = _catalog()
        await catalog.put(_team("research", ADA, AgentSpec(name="grace", role="r", tools=("t",))))
        await catalog.put(_team("writing", WENDY))
        return catalog.agents()

    agents = run(scenario())
    assert [(a.name, a.team, a.role, a.tools, a.in_flight) for a in agents] == [
        ("ada", "research", "researcher", (), 0),
        ("grace", "research", "r", ("t",), 0),
        ("wendy", "writing", "writer", (), 0),
    ]


# inline teams and jobs


def test_check_unregistered_refuses_a_registered_agent_name_configured_differently():
    catalog, _ = _catalog()
    run(catalog.put(_team("research", ADA, GRACE)))
    inline = _team("adhoc", AgentSpec(name="ada", role="researcher", model="other"), WENDY)
    with pytest.raises(Conflict, match="ada") as caught:
        catalog.check_unregistered(inline)
    assert caught.value.detail == {"agents": ["ada"], "teams": ["research"]}


def test_check_unregistered_accepts_identical_agents_and_new_names():
    catalog, _ = _catalog()
    run(catalog.put(_team("research", ADA, GRACE)))
    catalog.check_unregistered(_team("adhoc", ADA, WENDY))
    catalog.check_unregistered(_team("research", ADA))
    catalog.check_unregistered(_team("fresh", AgentSpec(name="newbie", role="x")))


def test_a_shard_provisions_a_named_team_as_registered_now_and_an_inline_one_as_given():
    """A registered team's agents are shared: a job admitted under an older version (or
    resumed after a restart) must not put them back to it; the desk says what is current."""

    async def scenario():
        provisioner = Provisioner()
        router = LocalRouterClient(MessageRouter())
        desk, (shard,) = await control_plane(router, provisioner)
        old, new = _team("research", ADA), _team("research", ADA, GRACE)
        await desk.put_team(old)
        named = _admitted("job-00000000000000a1", old, registered=True)
        inline = _admitted("job-00000000000000a2", _team("research", WENDY), registered=False)
        await desk.put_team(new)  # after the job was admitted, before it is provisioned
        await shard.adopt(named)
        await shard.wait(named.id, 10)
        await shard.adopt(inline)
        await shard.wait(inline.id, 10)
        await desk.delete_team("research")
        gone = _admitted("job-00000000000000a3", old, registered=True)
        await shard.adopt(gone)
        return provisioner.provisioned[2:], await shard.wait(gone.id, 10), new, inline.team

    provisioned, gone, new, inline = run(scenario())
    assert provisioned == [new, inline]
    assert (gone.status, gone.error.code) == ("failed", ErrorCode.TEAM_NOT_FOUND)


def _admitted(job_id, team, *, registered):
    return Admitted(
        id=job_id,
        context=JobContext(request="t"),
        team=team,
        tenant="default",
        submitted_at=0.0,
        budget=None,
        route=None,
        images=(),
        request_id=None,
        registered=registered,
    )


# persistence


def test_a_new_catalog_on_the_same_journal_sees_the_teams(tmp_path):
    path = tmp_path / "journal.sqlite"
    research = Team.from_dict(
        {"name": "research", "agents": [{"name": "ada", "role": "researcher"}]}
    ).spec()

    async def scenario():
        journal = Journal(path)
        catalog, _ = _catalog(journal)
        await catalog.put(research)
        await catalog.put(_team("writing", WENDY))
        await catalog.put_agent("research", GRACE)
        await catalog.put(_team("doomed", AgentSpec(name="x", role="y")))
        await catalog.delete("doomed")
        journal.close()

    run(scenario())
    journal = Journal(path)
    reopened, _ = _catalog(journal)
    assert list(reopened.teams()) == ["research", "writing"]
    assert reopened.team("research").agents == (ADA, GRACE)
    assert reopened.team("writing").agents == (WENDY,)
    with pytest.raises(TeamNotFound):
        reopened.team("doomed")
    journal.close()


def test_a_catalog_without_a_journal_keeps_teams_in_memory():
    catalog = TeamCatalog(None, Provisioner())
    assert run(catalog.put(_team("research", ADA))) is True
    assert list(catalog.teams()) == ["research"]


# attachments


def _b64(data):
    return base64.b64encode(data).decode()


PNG = _b64(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize("media_type", ["image/png", "image/jpeg", "image/gif", "image/webp"])
def test_an_image_may_be_given_as_data_or_url(media_type):
    by_data = Attachment(name="a", media_type=media_type, data_b64=PNG)
    by_url = Attachment(name="a", media_type=media_type, url="https://example.com/a")
    assert by_data.image().data_b64 == PNG
    assert by_data.image().media_type == media_type
    assert by_url.image().url == "https://example.com/a"
    assert by_data.text() is None
    assert Attachment(name="a", media_type=media_type, url="http://example.com/a").url


@pytest.mark.parametrize(
    "media_type", ["text/markdown", "text/plain", "application/json", "application/yaml"]
)
def test_a_text_file_is_read_as_utf8(media_type):
    attachment = Attachment(name="notes", media_type=media_type, data_b64=_b64("héllo ✓".encode()))
    assert attachment.text() == "héllo ✓"
    assert attachment.image() is None


def test_a_text_file_must_be_utf8():
    with pytest.raises(ValidationError, match="'notes' is not UTF-8 text"):
        Attachment(name="notes", media_type="text/plain", data_b64=_b64(b"\xff\xfe\x00"))


@pytest.mark.parametrize(
    "media_type", ["application/pdf", "application/octet-stream", "image/tiff", "video/mp4"]
)
def test_unsupported_media_types_are_refused(media_type):
    with pytest.raises(ValidationError, match="unsupported media type"):
        Attachment(name="f", media_type=media_type, data_b64=PNG)


@pytest.mark.parametrize("media_type", ["png", "Image/PNG", "image/", "/png", "text plain"])
def test_a_media_type_must_look_like_one(media_type):
    with pytest.raises(ValidationError, match="is not a media type"):
        Attachment(name="f", media_type=media_type, data_b64=PNG)


def test_an_attachment_needs_exactly_one_of_data_and_url():
    with pytest.raises(ValidationError, match="exactly one of data_b64 or url"):
        Attachment(name="a", media_type="image/png")
    with pytest.raises(ValidationError, match="exactly one of data_b64 or url"):
        Attachment(name="a", media_type="image/png", data_b64=PNG, url="https://example.com/a")


def test_text_is_only_given_as_data():
    with pytest.raises(ValidationError, match="only images may be given by URL"):
        Attachment(name="a", media_type="text/plain", url="https://example.com/a.txt")


@pytest.mark.parametrize("url", ["ftp://example.com/a.png", "file:///etc/passwd", "example.com"])
def test_an_image_url_must_be_http(url):
    with pytest.raises(ValidationError, match="must be http"):
        Attachment(name="a", media_type="image/png", url=url)


def test_data_must_be_base64():
    with pytest.raises(ValidationError, match="not base64"):
        Attachment(name="a", media_type="image/png", data_b64="not base64!")


def test_with_files_appends_each_text_file_under_its_name_and_skips_images():
    files = (
        Attachment(name="notes.md", media_type="text/markdown", data_b64=_b64(b"  # Notes\n\n")),
        Attachment(name="photo", media_type="image/png", data_b64=PNG),
        Attachment(name="data.json", media_type="application/json", data_b64=_b64(b'{"a": 1}')),
    )
    assert with_files("Summarize.", files) == (
        "Summarize.\n\n"
        "--- file: notes.md (text/markdown) ---\n# Notes\n\n"
        '--- file: data.json (application/json) ---\n{"a": 1}'
    )
    assert with_files("Summarize.", ()) == "Summarize."
    assert with_files("Look.", files[1:2]) == "Look."
