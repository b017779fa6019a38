"""Sessions in one process: the store's tenant scoping, the history a job is shown (newest
turns whole, oldest summarized through the pool), a 10-turn conversation whose last turn
needs a fact from its second, and sessions outliving their orchestrator."""

import pytest
from wiring import build_troupe, order, run

from raytroupe.actors.desk.sessions import SessionDesk, SessionStore
from raytroupe.actors.llm.tokens import count_tokens
from raytroupe.protocols import (
    AgentSpec,
    ChatMessage,
    Forbidden,
    InvalidInput,
    LLMRequest,
    LLMResponse,
    ModelError,
    OfflineModel,
    SessionNotFound,
    TeamSpec,
)
from raytroupe.protocols.job_context import History, JobContext, Turn
from raytroupe.protocols.prompts import HISTORY_HEADING, job_prompt
from raytroupe.protocols.sessions import SessionTurn

TEAM = TeamSpec(
    name="chat",
    planner_model="offline",
    agents=(AgentSpec(name="chat-ada", role="assistant", model="offline"),),
)
MODELS = {"offline": OfflineModel(), "default": OfflineModel()}

FACTS = [
    "Please remember that my sister Marguerite lives in Lyon.",
    "My sister Marguerite has a cat called Pilou.",
]
CHATTER = [
    f"Tell me one fact about the planet number {n} from the sun, in a sentence." for n in range(8)
]


def _texts(request: LLMRequest) -> str:
    return "\n".join(m.text for m in request.messages)


class TestStore:
    def test_sessions_are_per_tenant(self):
        store = SessionStore.in_memory()
        store.create("acme", "chat-1", "Acme's")
        other, made = store.create("globex", "chat-1", "Globex's")
        assert made
        assert other.title == "Globex's"
        store.add_turn("acme", "chat-1", "job-a", "hello")
        assert [t.job_id for t in store.get("acme", "chat-1").turns] == ["job-a"]
        assert store.get("globex", "chat-1").turns == ()
        assert [s.id for s in store.listed("globex")] == ["chat-1"]
        assert store.delete("globex", "chat-1")
        assert not store.delete("globex", "chat-1")
        with pytest.raises(SessionNotFound):
            store.get("globex", "chat-1")
        assert store.get("acme", "chat-1").turns[0].task == "hello"  # untouched

    def test_a_session_made_again_keeps_what_it_was_made_with(self):
        store = SessionStore.in_memory()
        _, made = store.create("acme", "s", "first", 500)
        again, made_again = store.create("acme", "s", "second", 9000)
        assert made
        assert not made_again
        assert (again.title, again.history_tokens) == ("first", 500)

    def test_a_session_is_for_an_end_user_and_listed_under_them(self):
        store = SessionStore.in_memory()
        store.create("acme", "ana-1", user="ana")
        store.create("acme", "bo-1", user="bo")
        store.create("acme", "shared")
        store.create("globex", "ana-g", user="ana")
        assert store.user("acme", "ana-1") == "ana"
        assert store.user("acme", "shared") is None
        assert [s.id for s in store.listed("acme", user="ana")] == ["ana-1"]
        assert {s.id for s in store.listed("acme")} == {"ana-1", "bo-1", "shared"}
        assert store.get("acme", "bo-1").user == "bo"
        again, made = store.create("acme", "ana-1", user="bo")  # kept as it was made
        assert (again.user, made) == ("ana", False)
        with pytest.raises(SessionNotFound):
            store.user("globex", "ana-1")

    def test_a_store_of_the_schema_before_end_users_is_migrated(self, tmp_path):
        from raytroupe.actors.desk import sessions as sessions_module  # noqa: PLC0415
        from raytroupe.actors.state import open_database  # noqa: PLC0415

        path = tmp_path / "journal.sqlite"
        old = open_database(path, "sessions", sessions_module._MIGRATIONS[:1])
        old.execute("INSERT INTO sessions VALUES ('acme', 'before', 't', 1.0, 1.0, '', 0, 4000)")
        old.close()
        store = SessionStore(open_database(path, "sessions", sessions_module._MIGRATIONS))
        assert store.get("acme", "before").user is None
        store.create("acme", "after", user="ana")
        assert [s.id for s in store.listed("acme", user="ana")] == ["after"]

    def test_turns_are_numbered_and_settled(self):
        store = SessionStore.in_memory()
        store.create("acme", "s")
        assert [store.add_turn("acme", "s", f"j{i}", f"t{i}") for i in range(3)] == [1, 2, 3]
        store.settle("acme", "s", 2, "succeeded", "an answer")
        turns = store.get("acme", "s").turns
        assert [(t.status, t.answer) for t in turns] == [
            ("running", None), ("succeeded", "an answer"), ("running", None),
        ]  # fmt: skip
        with pytest.raises(SessionNotFound):
            store.add_turn("acme", "gone", "j", "t")

    def test_the_summary_only_moves_forward(self):
        store = SessionStore.in_memory()
        store.create("acme", "s")
        store.summarized("acme", "s", "through four", 4)
        store.summarized("acme", "s", "through two (late)", 2)
        info = store.get("acme", "s")
        assert (info.summary, info.summarized_through) == ("through four", 4)


def _turn(seq: int, task: str, answer: str) -> SessionTurn:
    return SessionTurn(seq=seq, job_id=f"j{seq}", task=task, status="succeeded",
                       answer=answer, at=float(seq))  # fmt: skip


class TestHistory:
    async def _history(self, store, ask, running=()):
        async def result_of(job_id):
            assert job_id in running, "a settled turn's job is not asked again"  # still running

        return await SessionDesk(store).history("acme", "s", result_of, ask)

    def _store(self, turns, history_tokens=200):
        store = SessionStore.in_memory()
        store.create("acme", "s", history_tokens=history_tokens)
        for turn in turns:
            store.add_turn("acme", "s", turn.job_id, turn.task)
            store.settle("acme", "s", turn.seq, "succeeded", turn.answer)
        return store

    def test_a_short_history_is_shown_whole_and_nothing_is_summarized(self):
        store = self._store([_turn(1, "My name is Ada.", "Hello Ada.")], history_tokens=2000)

        async def ask(_request):
            raise AssertionError("nothing to summarize")

        history = run(self._history(store, ask))
        shown = job_prompt(JobContext(request="What is my name?", history=history))
        assert "user: My name is Ada.\nassistant: Hello Ada." in shown
        assert shown.startswith("What is my name?\n\nThe conversation so far")

    def test_turns_that_do_not_fit_are_summarized_and_the_budget_holds(self):
        words = " ".join(f"word{i}" for i in range(40))
        turns = [_turn(i, f"Turn {i} says {words}.", f"Answer {i}.") for i in range(1, 9)]
        store = self._store(turns, history_tokens=400)
        asked: list[LLMRequest] = []

        async def ask(request):
            asked.append(request)
            return LLMResponse(text="They talked about words.", model="m", provider="p")

        history = run(self._history(store, ask))
        assert [r.purpose for r in asked] == ["summarize"]
        summarized = _texts(asked[0])
        assert "user: Turn 1 says" in summarized
        assert history.summary == "They talked about words."
        assert history.turns
        assert history.turns[-2].text.startswith("Turn 8 says")
        rendered = job_prompt(JobContext(request="", history=history))
        assert "Turn 1 says" not in rendered
        assert count_tokens(rendered) <= 400
        info = store.get("acme", "s")
        assert history.turns[0].text.startswith(f"Turn {info.summarized_through + 1} says")
        # read again: nothing new to summarize
        again = run(self._history(store, ask))
        assert len(asked) == 1
        assert again.turns == history.turns

    def test_a_failed_summary_says_turns_were_left_out(self):
        words = " ".join(f"word{i}" for i in range(40))
        turns = [_turn(i, f"Turn {i}: {words}.", "ok") for i in range(1, 9)]
        store = self._store(turns, history_tokens=400)

        async def ask(_request):
            raise ModelError("the pool is down")

        history = run(self._history(store, ask))
        assert "earlier turn(s) left out" in history.summary
        assert history.turns[-2].text.startswith("Turn 8:")

    def test_unfinished_and_failed_turns_are_not_shown(self):
        store = SessionStore.in_memory()
        store.create("acme", "s")
        store.add_turn("acme", "s", "j1", "first")
        store.settle("acme", "s", 1, "failed", None)
        store.add_turn("acme", "s", "j2", "second")  # still running
        history = run(self._history(store, None, running=("j2",)))
        assert history == History()
        assert not history
        assert store.get("acme", "s").turns[1].status == "running"


class TestJobsInSessions:
    def test_turn_ten_sees_a_fact_from_turn_two(self):
        """Ten jobs in one session with a small history budget: the second turn's fact
        leaves the window, is summarized by the pool, and the tenth job's prompt has it."""

        async def scenario():
            troupe = await build_troupe(MODELS)
            orch = troupe.desk
            session = await orch.create_session("acme", "talk", history_tokens=500)
            tasks = [CHATTER[0], FACTS[0], *CHATTER[1:8], "In which city does my sister live?"]
            results = []
            for task in tasks:
                job_id = await orch.submit(*order(task, TEAM, tenant="acme", session=session.id))
                results.append(await troupe.orchestrator.wait(job_id, 30))
            return troupe, results, await orch.session("talk", tenant="acme")

        troupe, results, info = run(scenario(), 120)
        assert all(r is not None and r.status == "succeeded" for r in results)
        assert [t.status for t in info.turns] == ["succeeded"] * 10
        assert info.turns[1].task == FACTS[0]  # the caller's words, not the history
        requests = troupe.llm.payloads(LLMRequest)
        summaries = [r for r in requests if r.purpose == "summarize"]
        assert summaries, "the history outgrew 500 tokens: it was summarized"
        assert any("Marguerite lives in Lyon" in _texts(r) for r in summaries)
        last_job = results[-1].job_id
        last = [
            m.payload
            for m in troupe.llm.seen
            if m.job_id == last_job and isinstance(m.payload, LLMRequest)
        ]
        asked = [r for r in last if r.purpose != "summarize"]
        assert asked
        assert all("Marguerite lives in Lyon" in _texts(r) for r in asked)
        assert "Marguerite lives in Lyon" in results[-1].answer
        # the fact reached it through the summary: turn 2 is no longer shown whole
        assert info.summarized_through >= 2
        # the history is beside the request, not in it
        assert results[-1].task == "In which city does my sister live?"
        assert all("The conversation so far" in _texts(r) for r in asked)

    def test_another_tenant_cannot_use_or_read_the_session(self):
        async def scenario():
            troupe = await build_troupe(MODELS)
            orch = troupe.desk
            await orch.create_session("acme", "private")
            with pytest.raises(SessionNotFound):
                await orch.submit(*order("hi", TEAM, tenant="globex", session="private"))
            with pytest.raises(SessionNotFound):
                await orch.session("private", tenant="globex")
            with pytest.raises(SessionNotFound):
                await orch.delete_session("private", tenant="globex")
            assert await orch.sessions(tenant="globex") == []
            return await orch.session("private", tenant="acme")

        assert run(scenario()).turns == ()

    def test_an_end_users_session_takes_only_that_users_jobs(self):
        async def scenario():
            troupe = await build_troupe(MODELS)
            desk = troupe.desk
            await desk.create_session("acme", "ana-chat", user="ana")
            await desk.create_session("acme", "shared")
            with pytest.raises(Forbidden) as refused:  # bo's job cannot read ana's turns
                await desk.submit(*order("hi", TEAM, tenant="acme", session="ana-chat",
                                         user="bo"))  # fmt: skip
            with pytest.raises(Forbidden):  # nor be made bo's by creating it again
                await desk.create_session("acme", "ana-chat", user="bo")
            hers = await desk.submit(*order("hi", TEAM, tenant="acme", session="ana-chat"))
            bos = await desk.submit(*order("hi", TEAM, tenant="acme", session="shared",
                                           user="bo"))  # fmt: skip
            for job_id in (hers, bos):
                await troupe.orchestrator.wait(job_id, 30)
            summaries = {
                job_id: await troupe.orchestrator.summary(job_id, tenant="acme")
                for job_id in (hers, bos)
            }
            listed = await desk.sessions(tenant="acme", user="ana")
            return refused.value, summaries, listed, await desk.session("ana-chat", tenant="acme")

        refused, summaries, listed, chat = run(scenario(), 60)
        assert refused.detail["field"] == "user"
        assert [s.user for s in summaries.values()] == ["ana", "bo"]  # taken from the session
        assert [s.id for s in listed] == ["ana-chat"]
        assert len(chat.turns) == 1  # the refused job was no turn of it

    def test_bad_ids_and_budgets_are_refused(self):
        async def scenario():
            troupe = await build_troupe(MODELS)
            orch = troupe.desk
            for bad in ("../etc", "a" * 129, "white space", "-leading"):
                with pytest.raises(InvalidInput):
                    await orch.create_session("acme", bad)
            with pytest.raises(InvalidInput):
                await orch.create_session("acme", "s", history_tokens=10)
            made = await orch.create_session("acme")
            assert made.id.startswith("s-")

        run(scenario())

    def test_sessions_outlive_the_orchestrator(self, tmp_path):
        journal = tmp_path / "journal.db"

        async def first():
            troupe = await build_troupe(MODELS, journal=journal)
            orch = troupe.desk
            await orch.create_session("acme", "kept", title="kept")
            job_id = await orch.submit(*order(FACTS[1], TEAM, tenant="acme", session="kept"))
            result = await troupe.orchestrator.wait(job_id, 30)
            await orch.on_stop()
            await troupe.orchestrator.on_stop()
            return result

        async def second():
            troupe = await build_troupe(MODELS, journal=journal)
            orch = troupe.desk
            job_id = await orch.submit(*order("What is the cat called?", TEAM, tenant="acme",
                                       session="kept"))  # fmt: skip
            await troupe.orchestrator.wait(job_id, 30)
            return troupe, await orch.session("kept", tenant="acme")

        assert run(first(), 60).status == "succeeded"
        troupe, info = run(second(), 60)
        assert [t.status for t in info.turns] == ["succeeded", "succeeded"]
        assert info.turns[0].task == FACTS[1]
        work = [r for r in troupe.llm.payloads(LLMRequest) if r.purpose != "summarize"]
        assert any("Pilou" in _texts(r) for r in work)


def test_history_renders_each_turn_on_its_lines():
    history = History(
        summary="Earlier: a dog.",
        turns=(
            Turn(role="user", text="line one\nline two"),
            Turn(role="assistant", text="yes\nno"),
        ),
    )
    rendered = job_prompt(JobContext(request="Go on.", history=history))
    assert rendered.splitlines() == [
        "Go on.",
        "",
        HISTORY_HEADING,
        "Summary of earlier turns: Earlier: a dog.",
        "user: line one line two",
        "assistant: yes no",
    ]
    assert ChatMessage(role="user", content=rendered).text == rendered
