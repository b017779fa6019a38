"""The session operations, declared once: the same on the HTTP API, its clients, the driver
and a tenant's view; always the caller's tenant's, an admin's key too; bad ids, titles and
history budgets refused before the desk hears of them. Against a real Ray and Serve:
tests/integration/test_sessions_ray.py."""

from __future__ import annotations

import pytest
from surfaces import ADMIN, USER, Driver, over_http, sent
from wiring import run

from raytroupe.protocols import InvalidInput, SessionNotFound
from raytroupe.protocols.sessions import HISTORY_TOKENS, SessionInfo
from raytroupe.runtime.driver import Runtime
from raytroupe.runtime.operations import invoke
from raytroupe.runtime.operations import sessions as session_ops
from raytroupe.runtime.tenant import TenantView


class Desk:
    """The desk's session calls, recorded, over one in-memory set of sessions."""

    def __init__(self):
        self.calls = []
        self.kept: dict[tuple[str, str], SessionInfo] = {}

    async def create_session(
        self, tenant, session_id=None, *, title="", history_tokens=HISTORY_TOKENS, user=None
    ):
        self.calls.append(("create_session", tenant, session_id, title, history_tokens, user))
        session_id = session_id or f"fresh-{len(self.kept)}"
        return self.kept.setdefault((tenant, session_id), SessionInfo(
            id=session_id, tenant=tenant, title=title, created_at=1.0, updated_at=1.0,
            history_tokens=history_tokens, user=user,
        ))  # fmt: skip

    async def session(self, session_id, *, tenant):
        self.calls.append(("session", session_id, tenant))
        if (tenant, session_id) not in self.kept:
            raise SessionNotFound(f"no session {session_id!r}", session=session_id)
        return self.kept[tenant, session_id]

    async def sessions(self, *, tenant, limit=100, user=None):
        self.calls.append(("sessions", tenant, limit, user))
        found = [s for (t, _), s in self.kept.items() if t == tenant and user in (None, s.user)]
        return found[:limit]

    async def delete_session(self, session_id, *, tenant):
        self.calls.append(("delete_session", session_id, tenant))
        if self.kept.pop((tenant, session_id), None) is None:
            raise SessionNotFound(f"no session {session_id!r}", session=session_id)


def test_http_and_the_driver_keep_sessions_alike_in_the_callers_tenant():
    async def over(client):
        made = await client.create_session("chat-1", title="tea", history_tokens=500)
        fresh = await client.create_session()
        await client.create_session("chat-ana", user="ana")
        assert [s.id for s in await client.sessions(user="ana")] == ["chat-ana"]
        listed = await client.sessions(limit=5)
        shown = await client.session("chat-1")
        await client.delete_session("chat-1")
        return made, fresh, listed, shown

    desk = Desk()
    made, fresh, listed, shown = over_http(desk, ADMIN, over)
    assert (made.id, made.title, made.history_tokens, made.tenant) == ("chat-1", "tea", 500, "acme")
    assert fresh.history_tokens == HISTORY_TOKENS  # the server's default, not the client's
    assert [s.id for s in listed] == ["chat-1", fresh.id, "chat-ana"]
    assert shown == made
    http_calls = desk.calls

    desk = Desk()
    driver = Driver(desk, admin=True)
    assert driver.create_session("chat-1", title="tea", history_tokens=500) == made
    driver.create_session()
    driver.create_session("chat-ana", user="ana")
    assert [s.id for s in driver.sessions(user="ana")] == ["chat-ana"]
    assert [s.id for s in driver.sessions(limit=5)] == [s.id for s in listed]
    assert driver.session("chat-1") == shown
    assert driver.delete_session("chat-1") is None
    assert desk.calls == http_calls  # an admin's key, like the driver, acts in its tenant only
    tenants = {c[1] if c[0] in {"create_session", "sessions"} else c[-1] for c in desk.calls}
    assert tenants == {"acme"}


def test_another_tenants_session_is_not_found_and_deleting_twice_is_not_found():
    desk = Desk()
    run(desk.create_session("globex", "private"))

    async def reach(client):
        for call in (client.session("private"), client.delete_session("private")):
            with pytest.raises(SessionNotFound):
                await call
        return await client.sessions()

    assert over_http(desk, USER, reach) == []
    assert ("globex", "private") in desk.kept
    driver = Driver(desk, admin=False, tenant="globex")
    driver.delete_session("private")
    with pytest.raises(SessionNotFound):
        driver.delete_session("private")


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"session_id": "../x"}, "session_id"),
        ({"session_id": ""}, "session_id"),
        ({"title": "a\x00b"}, "title"),
        ({"title": "t" * 201}, "title"),
        ({"history_tokens": 10}, "history_tokens"),
        ({"history_tokens": 10**9}, "history_tokens"),
    ],
)
def test_bad_sessions_are_refused_on_every_surface_before_the_desk_hears(arguments, field):
    desk = Desk()
    with pytest.raises(InvalidInput) as refused:
        Driver(desk, admin=True).create_session(**arguments)
    assert refused.value.detail["field"] == field

    async def over(client):
        with pytest.raises(InvalidInput):
            await client.create_session(**arguments)

    over_http(desk, USER, over)
    assert desk.calls == []


def test_the_wire_body_keeps_its_id_field_and_refuses_others():
    desk = Desk()
    made, renamed, bad_path = sent(desk, [
        ("POST", "/v1/sessions", {"json": {"id": "s-1"}}),
        ("POST", "/v1/sessions", {"json": {"session_id": "s-2"}}),
        ("GET", "/v1/sessions/..%2Fx", {}),
    ], USER)  # fmt: skip
    assert (made.status_code, made.json()["id"]) == (201, "s-1")
    assert renamed.status_code == 422, renamed.text
    assert bad_path.status_code in {404, 422}
    assert [c[2] for c in desk.calls] == ["s-1"]


def test_the_drivers_session_is_a_handle_and_invoke_reads_it_as_the_operation():
    assert getattr(Runtime.session, "handle_of", None) is session_ops.session
    assert getattr(TenantView.session, "handle_of", None) is session_ops.session
    desk = Desk()
    run(desk.create_session("acme", "chat"))
    driver = Driver(desk, admin=False)
    assert invoke(driver, session_ops.session, "chat").id == "chat"

    async def over(client):
        return await client.session("chat")

    assert over_http(desk, USER, over).id == "chat"


def test_the_drivers_old_tenant_keyword_still_lists_and_warns():
    assert Runtime.__dict__["sessions"].op is session_ops.sessions
    desk = Desk()
    run(desk.create_session("globex", "g"))

    class Old(Driver):
        sessions = Runtime.__dict__["sessions"]

    with pytest.warns(DeprecationWarning, match=r"as_tenant\(tenant\)\.sessions"):
        found = Old(desk, admin=True).sessions(tenant="globex")
    assert [s.id for s in found] == ["g"]
