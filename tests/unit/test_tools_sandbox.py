"""The tool sandbox's policy, without Ray and without isolated processes."""

import asyncio
import os
import stat
import tempfile

import pytest
from wiring import run, started, started_now

from raytroupe.actors.tools.idempotency import IdempotencyStore, effect_key, idempotency_key
from raytroupe.actors.tools.sandbox import ToolSandbox, ToolsConfig
from raytroupe.actors.tools.validation import coerce, validate_arguments
from raytroupe.protocols import (
    ConfigError,
    ErrorCode,
    InvalidArguments,
    RecipientUnavailable,
    ToolCall,
    ToolDef,
    ToolError,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "flag": {"type": "boolean"},
        "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["n"],
    "additionalProperties": False,
}


@pytest.fixture
def sandbox(tmp_path):
    box = started_now(
        ToolSandbox(ToolsConfig(state_dir=tmp_path / "state", scratch_root=tmp_path / "s"))
    )
    yield box
    run(box.close())


def call(tool, **arguments):
    return ToolCall(call_id="c1", tool=tool, arguments=arguments, task_id="t1", step=1)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"n": "3"}, {"n": 3}),
        ({"n": 3.0}, {"n": 3}),
        ({"n": 1, "flag": "true"}, {"n": 1, "flag": True}),
        ({"n": 1, "flag": "False"}, {"n": 1, "flag": False}),
        ({"n": 1, "ratio": "2.5"}, {"n": 1, "ratio": 2.5}),
        ({"n": 1, "tags": ["1", 2]}, {"n": 1, "tags": [1, 2]}),
        ('{"n": "7"}', {"n": 7}),
    ],
)
def test_common_model_slips_are_coerced(given, expected):
    assert validate_arguments(given, SCHEMA, tool="t") == expected


@pytest.mark.parametrize(
    ("given", "path"),
    [
        ({"n": "three"}, "n"),
        ({}, "(arguments)"),
        ({"n": 1, "extra": 2}, "(arguments)"),
        ({"n": 1, "flag": "maybe"}, "flag"),
        ({"n": 2.5}, "n"),
    ],
)
def test_what_cannot_be_coerced_is_reported_field_by_field(given, path):
    with pytest.raises(InvalidArguments) as caught:
        validate_arguments(given, SCHEMA, tool="t")
    assert caught.value.detail["errors"][0]["path"] == path
    assert "invalid arguments for 't'" in caught.value.message


def test_coercion_never_changes_what_a_string_field_receives():
    assert coerce("3", {"type": "string"}) == "3"


def test_a_tool_not_granted_is_refused_whatever_the_model_asks(sandbox):
    async def main():
        await sandbox.grant("ada", ["calculator"])
        allowed = await sandbox.call(call("calculator", expression="2+2"), agent="ada", job_id="j")
        refused = await sandbox.call(call("python", code="print(1)"), agent="ada", job_id="j")
        stranger = await sandbox.call(call("calculator", expression="1"), agent="eve", job_id="j")
        return allowed, refused, stranger

    allowed, refused, stranger = run(main())
    assert (allowed.ok, allowed.data, allowed.call_id, allowed.tool) == (
        True,
        4,
        "c1",
        "calculator",
    )
    assert refused.error.code is ErrorCode.TOOL_NOT_ALLOWED
    assert stranger.error.code is ErrorCode.TOOL_NOT_ALLOWED


def test_grants_survive_a_restart(tmp_path):
    config = ToolsConfig(state_dir=tmp_path / "state", scratch_root=tmp_path / "s")

    async def main():
        first = await started(ToolSandbox(config))
        await first.grant("ada", ["calculator"])
        await first.close()
        second = await started(ToolSandbox(config))
        result = await second.call(call("calculator", expression="3*3"), agent="ada", job_id="j")
        await second.close()
        return result

    assert run(main()).data == 9


def test_granting_an_unknown_tool_is_a_config_error(sandbox):
    with pytest.raises(ConfigError, match="unknown tool"):
        run(sandbox.grant("ada", ["calculator", "teleport"]))


def test_invalid_arguments_come_back_for_the_model_to_correct(sandbox):
    async def main():
        await sandbox.grant("ada", ["calculator"])
        return await sandbox.call(call("calculator", expr="1+1"), agent="ada", job_id="j")

    result = run(main())
    assert not result.ok
    assert result.error.code is ErrorCode.INVALID_ARGUMENTS
    assert "expression" in result.error.message


def test_a_side_effecting_call_runs_once_per_key_even_across_restarts(tmp_path):
    config = ToolsConfig(state_dir=tmp_path / "state", scratch_root=tmp_path / "s")
    runs = []

    async def effect(arguments, _ctx):
        runs.append(arguments)
        return {"sent": arguments["to"]}

    definition = ToolDef(
        name="send_mail",
        description="Sends a mail.",
        parameters={"type": "object", "properties": {"to": {"type": "string"}}},
        side_effects=True,
    )

    async def one_call(box, call_id, step, to="x@example.org", task_id="t1"):
        box.register(definition, effect)
        await box.grant("ada", ["send_mail"])
        the_call = ToolCall(call_id=call_id, tool="send_mail", arguments={"to": to},
                            task_id=task_id, step=step)  # fmt: skip
        return await box.call(the_call, agent="ada", job_id="job-1")

    async def main():
        first = await started(ToolSandbox(config))
        done = await one_call(first, "model-id-1", 1000)
        await first.close()
        second = await started(
            ToolSandbox(config)
        )  # a restarted sandbox, the model changed its call id, and the subtask run again
        again = await one_call(second, "model-id-2", 2000)  # came to the call a turn later
        other = await one_call(second, "model-id-3", 3000, to="y@example.org")
        elsewhere = await one_call(second, "model-id-4", 1000, task_id="t2")
        await second.close()
        return done, again, other, elsewhere

    done, again, other, elsewhere = run(main())
    assert runs == [{"to": "x@example.org"}, {"to": "y@example.org"}, {"to": "x@example.org"}]
    assert (done.data, again.data) == ({"sent": "x@example.org"}, {"sent": "x@example.org"})
    assert again.metadata["replayed"] is True
    assert again.call_id == "model-id-2"
    assert "replayed" not in other.metadata  # another call: it runs
    assert "replayed" not in elsewhere.metadata  # another subtask's: it runs


def test_a_call_without_side_effects_is_answered_as_before_at_its_step_after_a_restart(tmp_path):
    """A subtask run again from its first turn is shown what its tools answered the first
    time (so its model's kept answers replay); another step, or no job, runs the tool."""
    config = ToolsConfig(state_dir=tmp_path / "state", scratch_root=tmp_path / "s")
    runs = []

    async def clock(_arguments, _ctx):
        runs.append(1)
        if len(runs) == 4:  # the fourth run fails in a way that may pass
            raise RecipientUnavailable("the clock's peer is restarting")
        return {"now": len(runs)}

    async def one_call(box, step, job_id="job-1"):
        box.register(ToolDef(name="clock", description="The time."), clock)
        await box.grant("ada", ["clock"])
        asked = ToolCall(call_id=f"c{step}", tool="clock", arguments={}, task_id="t1", step=step)
        return await box.call(asked, agent="ada", job_id=job_id)

    async def main():
        first = await started(ToolSandbox(config))
        before = await one_call(first, 1000)
        await first.close()
        second = await started(ToolSandbox(config))  # restarted, and the subtask run again
        answers = [
            await one_call(second, 1000),  # the same step: what it answered then
            await one_call(second, 2000),  # the next turn: it runs
            await one_call(second, 1000, job_id=None),  # no job's run: it runs
            await one_call(second, 3000),  # fails in a way that may pass: not kept
            await one_call(second, 3000),
        ]
        await second.close()
        return before, answers

    before, (again, later, unplaced, failed, retried) = run(main())
    assert before.data == again.data == {"now": 1}
    assert again.metadata["replayed"] is True
    assert again.call_id == "c1000"
    assert (later.data, unplaced.data) == ({"now": 2}, {"now": 3})
    assert not failed.ok
    assert (retried.data, retried.metadata.get("replayed")) == ({"now": 5}, None)
    assert len(runs) == 5


class Gated:
    """A side-effecting tool ``slow_effect`` that counts its runs and waits for ``gate``."""

    def __init__(self) -> None:
        self.runs: list[int] = []
        self.gate, self.entered = asyncio.Event(), asyncio.Event()

    async def effect(self, _arguments, _ctx):
        self.runs.append(1)
        self.entered.set()
        await self.gate.wait()
        return "done"

    async def offer(self, sandbox):
        sandbox.register(
            ToolDef(name="slow_effect", description="x", side_effects=True), self.effect
        )
        await sandbox.grant("ada", ["slow_effect"])


def test_concurrent_duplicates_share_one_run(sandbox):
    gated = Gated()

    async def main():
        await gated.offer(sandbox)
        calls = [
            asyncio.create_task(sandbox.call(call("slow_effect"), agent="ada", job_id="j"))
            for _ in range(3)
        ]
        await gated.entered.wait()
        gated.gate.set()
        return await asyncio.gather(*calls)

    results = run(main())
    assert gated.runs == [1]
    assert [r.data for r in results] == ["done"] * 3


def test_failed_side_effects_may_run_again(sandbox):
    attempts = []

    async def flaky(_arguments, _ctx):
        attempts.append(1)
        if len(attempts) == 1:
            raise ToolError("the mail server said no")
        return "sent"

    async def main():
        sandbox.register(ToolDef(name="mail", description="x", side_effects=True), flaky)
        await sandbox.grant("ada", ["mail"])
        first = await sandbox.call(call("mail"), agent="ada", job_id="j")
        second = await sandbox.call(call("mail"), agent="ada", job_id="j")
        return first, second

    first, second = run(main())
    assert (first.ok, second.ok, second.data) == (False, True, "sent")


def test_a_crashing_tool_is_a_failed_result(sandbox):
    async def broken(_arguments, _ctx):
        raise RuntimeError("bug in the tool")

    async def main():
        sandbox.register(ToolDef(name="broken", description="x"), broken)
        await sandbox.grant("ada", ["broken"])
        return await sandbox.call(call("broken"), agent="ada", job_id="j")

    result = run(main())
    assert not result.ok
    assert "RuntimeError: bug in the tool" in result.error.message


def test_output_is_capped_and_flagged(tmp_path):
    config = ToolsConfig(
        state_dir=tmp_path / "state", scratch_root=tmp_path / "s", max_output_bytes=100
    )

    async def big(_arguments, _ctx):
        return "x" * 10_000

    async def main():
        box = await started(ToolSandbox(config))
        box.register(ToolDef(name="big", description="x"), big)
        await box.grant("ada", ["big"])
        result = await box.call(call("big"), agent="ada", job_id="j")
        await box.close()
        return result

    result = run(main())
    assert result.ok
    assert result.metadata["truncated"] is True
    assert len(result.data.encode()) <= 100


def test_output_schema_is_enforced(sandbox):
    async def wrong(_arguments, _ctx):
        return {"count": "many"}

    async def main():
        sandbox.register(
            ToolDef(
                name="counter",
                description="x",
                output_schema={"type": "object", "properties": {"count": {"type": "integer"}}},
            ),
            wrong,
        )
        await sandbox.grant("ada", ["counter"])
        return await sandbox.call(call("counter"), agent="ada", job_id="j")

    result = run(main())
    assert not result.ok
    assert "output does not match its schema" in result.error.message


def test_files_stay_inside_the_jobs_scratch(sandbox):
    async def main():
        await sandbox.grant("ada", ["file_write", "file_read"])
        wrote = await sandbox.call(
            call("file_write", path="notes/a.txt", content="hello"), agent="ada", job_id="j1"
        )
        read = await sandbox.call(call("file_read", path="notes/a.txt"), agent="ada", job_id="j1")
        other_job = await sandbox.call(
            call("file_read", path="notes/a.txt"), agent="ada", job_id="j2"
        )
        escape = await sandbox.call(
            call("file_read", path="../j1/notes/a.txt"), agent="ada", job_id="j2"
        )
        absolute = await sandbox.call(
            call("file_read", path="/etc/passwd"), agent="ada", job_id="j2"
        )
        return wrote, read, other_job, escape, absolute

    wrote, read, other_job, escape, absolute = run(main())
    assert wrote.ok
    assert read.data == "hello"
    assert not other_job.ok
    assert "leaves the job's scratch" in escape.error.message
    assert "leaves the job's scratch" in absolute.error.message


def test_http_get_refuses_domains_off_its_allow_list(sandbox):
    async def main():
        await sandbox.grant("ada", ["http_get"])
        return await sandbox.call(
            call("http_get", url="http://169.254.169.254/latest"), agent="ada", job_id="j"
        )

    result = run(main())
    assert not result.ok
    assert "may only fetch" in result.error.message


def test_shell_is_off_unless_enabled(tmp_path, sandbox):
    with pytest.raises(ConfigError):
        run(sandbox.grant("ada", ["shell"]))
    enabled = started_now(
        ToolSandbox(
            ToolsConfig(state_dir=tmp_path / "st2", scratch_root=tmp_path / "s2", enable_shell=True)
        )
    )
    assert "shell" in [d.name for d in run(enabled.find(tag="code"))]
    assert "shell" not in [d.name for d in run(sandbox.find(tag="code"))]
    run(enabled.close())


def test_discovery_by_tag_and_keyword(sandbox):
    assert {d.name for d in run(sandbox.find(tag="files"))} == {"file_read", "file_write"}
    assert [d.name for d in run(sandbox.find(keyword="arithmetic"))] == ["calculator"]


def test_idempotency_keys_ignore_the_model_call_id_but_not_the_step():
    base = idempotency_key("j", "t", 1, "mail", {"to": "a", "cc": ["b"]})
    assert base == idempotency_key("j", "t", 1, "mail", {"cc": ["b"], "to": "a"})
    assert base != idempotency_key("j", "t", 2, "mail", {"to": "a", "cc": ["b"]})
    assert base != idempotency_key("j2", "t", 1, "mail", {"to": "a", "cc": ["b"]})


def test_an_effects_key_is_its_call_in_its_subtask_at_whatever_step():
    base = effect_key("j", "t", "mail", {"to": "a", "cc": ["b"]})
    assert base == effect_key("j", "t", "mail", {"cc": ["b"], "to": "a"})
    for other in (("j2", "t", "mail"), ("j", "t2", "mail"), ("j", "t", "post")):
        assert effect_key(*other, {"to": "a", "cc": ["b"]}) != base
    assert effect_key("j", "t", "mail", {"to": "a"}) != base


def test_a_stale_claim_is_abandoned_never_taken_over(tmp_path):
    store = IdempotencyStore(tmp_path / "s.sqlite")
    assert store.claim("k", lease_s=60) == "claimed"
    assert store.claim("k", lease_s=60) == "held"  # a live call holds it
    assert store.claim("k", lease_s=0) == "abandoned"  # its holder died mid-call
    assert store.claim("k", lease_s=0) == "abandoned"  # and it stays so: at most once
    store.release("k")  # a clean failure gives the key back
    assert store.claim("k", lease_s=60) == "claimed"
    store.close()


def test_a_call_whose_earlier_run_was_cut_short_is_not_run_again(tmp_path):
    """A sandbox died between the side effect and recording it: the outcome is unknown."""
    runs = []

    async def effect(_arguments, _ctx):
        runs.append(1)
        return "done"

    config = ToolsConfig(state_dir=tmp_path / "st", scratch_root=tmp_path / "s")
    sandbox = started_now(ToolSandbox(config))
    definition = ToolDef(name="charge", description="x", side_effects=True, timeout_s=0.01)
    sandbox.register(definition, effect)
    key = effect_key("j", "t1", "charge", {})
    IdempotencyStore(config.state_dir / "tools.sqlite").claim(key, lease_s=1)  # the dead run

    async def main():
        await sandbox.grant("ada", ["charge"])
        await asyncio.sleep(0.05)  # its lease runs out
        return await sandbox.call(call("charge"), agent="ada", job_id="j")

    result = run(main())
    run(sandbox.close())
    assert runs == []
    assert not result.ok
    assert "may have taken effect; it is not run again" in result.error.message


def test_a_side_effect_that_timed_out_is_not_run_again(sandbox):
    """A timed-out function may still finish in its thread: its outcome is unknown."""
    runs = []

    async def slow(_arguments, _ctx):
        runs.append(1)
        await asyncio.sleep(1)
        return "done"

    async def main():
        definition = ToolDef(name="transfer", description="x", side_effects=True, timeout_s=0.05)
        sandbox.register(definition, slow)
        await sandbox.grant("ada", ["transfer"])
        first = await sandbox.call(call("transfer"), agent="ada", job_id="j")
        again = await sandbox.call(call("transfer"), agent="ada", job_id="j")
        return first, again

    first, again = run(main())
    assert runs == [1]
    assert not first.ok
    assert first.metadata["timed_out"] is True
    assert not again.ok


def test_a_caller_that_goes_away_does_not_cut_a_side_effect_short(sandbox):
    gated = Gated()

    async def main():
        await gated.offer(sandbox)
        first = asyncio.create_task(sandbox.call(call("slow_effect"), agent="ada", job_id="j"))
        await gated.entered.wait()
        first.cancel()  # the caller gives up while the effect is under way
        await asyncio.sleep(0)
        again = asyncio.create_task(sandbox.call(call("slow_effect"), agent="ada", job_id="j"))
        await asyncio.sleep(0.01)
        gated.gate.set()
        retried = await again
        later = await sandbox.call(call("slow_effect"), agent="ada", job_id="j")
        return first.cancelled(), retried, later

    cancelled, retried, later = run(main())
    assert cancelled
    assert gated.runs == [1]
    assert (retried.ok, retried.data) == (True, "done")
    assert later.metadata["replayed"] is True


def test_symlinks_planted_in_scratch_lead_nowhere(tmp_path, sandbox):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    scratch = tmp_path / "s" / "j3"
    scratch.mkdir(parents=True)
    (scratch / "dir-link").symlink_to(outside)
    (scratch / "file-link").symlink_to(outside / "secret.txt")

    async def main():
        await sandbox.grant("ada", ["file_read", "file_write"])
        ask = lambda tool, **a: sandbox.call(call(tool, **a), agent="ada", job_id="j3")  # noqa: E731
        return [
            await ask("file_read", path="dir-link/secret.txt"),
            await ask("file_read", path="file-link"),
            await ask("file_write", path="file-link", content="overwritten"),
            await ask("file_write", path="dir-link/new.txt", content="planted"),
        ]

    results = run(main())
    assert [r.ok for r in results] == [False, False, False, False]
    assert (outside / "secret.txt").read_text() == "top secret"
    assert not (outside / "new.txt").exists()


# -- the scratch root: this user's alone, or no tool runs -------------------------------------


def scratch_call(scratch_root, tmp_path):
    """A calculator call through a sandbox keeping its scratch in ``scratch_root``."""
    config = ToolsConfig(state_dir=tmp_path / "state", scratch_root=scratch_root)

    async def main():
        box = await started(ToolSandbox(config))
        await box.grant("ada", ["calculator"])
        try:
            return await box.call(call("calculator", expression="2+2"), agent="ada", job_id="j")
        finally:
            await box.close()

    return run(main())


def refused(result, path):
    """``result`` is the sandbox refusing the call for its scratch ``path``."""
    assert (result.ok, result.data) == (False, None)
    assert result.error.code is ErrorCode.TOOL_INFRASTRUCTURE
    assert result.error.retryable is False
    assert str(path) in result.error.message
    return result.error


def squat(path):
    """Make ``path`` as someone else would, first: another user's, or open to all."""
    path.mkdir()
    if os.geteuid() == 0:
        os.chown(path, 12345, 12345)
    else:  # only root can give a directory away; one that others may write is squatted too
        path.chmod(0o777)


def test_a_scratch_root_that_cannot_be_made_fails_the_call_naming_it(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    root = tmp_path / "file" / "scratch"

    error = refused(scratch_call(root, tmp_path), root)
    assert "cannot prepare the scratch directory" in error.message


def test_a_scratch_root_someone_else_made_first_is_refused(tmp_path):
    root = tmp_path / "s"
    squat(root)

    error = refused(scratch_call(root, tmp_path), root)
    assert "remove it, or set ToolsConfig.scratch_root" in error.message
    assert not (root / "j").exists()  # nothing of the job's was put there
    if os.geteuid() == 0:
        assert "belongs to another user (owner uid 12345" in error.message


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777], ids=oct)
def test_a_scratch_root_others_may_write_is_refused(tmp_path, mode):
    root = tmp_path / "s"
    root.mkdir()
    root.chmod(mode)

    error = refused(scratch_call(root, tmp_path), root)
    assert f"writable by group or others (owner uid {os.geteuid()}, mode {mode:#o})" in (
        error.message
    )


def test_a_symlink_as_scratch_root_is_refused_even_to_a_directory_of_ours(tmp_path):
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    root = tmp_path / "s"
    root.symlink_to(ours)

    error = refused(scratch_call(root, tmp_path), root)
    assert "is a symlink" in error.message
    assert list(ours.iterdir()) == []


@pytest.fixture
def temp_dir(tmp_path, monkeypatch):
    """A TMPDIR of the test's own, read afresh by ``tempfile``."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    (tmp_path / "tmp").mkdir()
    return tmp_path / "tmp"


def test_the_default_scratch_root_is_per_user_under_the_temp_dir_and_private(tmp_path, temp_dir):
    config = ToolsConfig(state_dir=tmp_path / "state")
    user_dir = temp_dir / f"raytroupe-{os.getuid()}"
    assert config.scratch_root == user_dir / "scratch"

    result = scratch_call(config.scratch_root, tmp_path)
    assert (result.ok, result.data) == (True, 4)
    for made in (user_dir, user_dir / "scratch", user_dir / "scratch" / "j"):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made
        assert made.stat().st_uid == os.geteuid()


def test_the_default_scratch_roots_user_directory_squatted_is_refused(tmp_path, temp_dir):
    user_dir = temp_dir / f"raytroupe-{os.getuid()}"
    squat(user_dir)

    refused(scratch_call(ToolsConfig().scratch_root, tmp_path), user_dir)
