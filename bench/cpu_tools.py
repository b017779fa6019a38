"""CPU-bound tools: a fan-out of pure-Python tool work, raytroupe against AutoGen core.

A job of N subtasks, each one tool call of ``WORK_S`` of pure-Python work: ``spin`` of
``bench/_cpu_work.py``, the same function and the same iterations on both sides (calibrated
here). Speedup = AutoGen time / raytroupe time for the same N; goal >= 1.8x at N = 8 on 2 cores.

- raytroupe: a local Ray of 2 CPUs with 2 tool sandboxes (2 processes), where ``spin`` is a
  function tool (``ToolsConfig.functions``, run in a sandbox worker thread). A team of
  ``AGENTS`` agents shares the N subtasks of a fixed plan; each subtask's model (a
  ``ScriptedModel``) calls ``spin`` once, then answers; every call goes agent -> router ->
  least busy sandbox. Timed at the driver from ``submit`` to ``result``: provisioning, 2N model
  calls, N tool calls and the offline model's aggregation included.
- The same team with the isolated ``python`` tool instead (a fresh sandboxed interpreter per
  call running ``spin``'s source), where this host can isolate.
- AutoGen core 0.7.5 (``bench/_autogen_cpu.py`` in ``bench/.venv-autogen``, created on first
  use): N worker agents on a ``SingleThreadedAgentRuntime``, a coordinator sending each a
  message at once; each handler calls ``spin`` as an AutoGen ``FunctionTool`` (in a thread),
  or, timed apart, calls it itself. The speedup is taken against the faster of the two.
- Sequential: N plain calls of ``spin`` (in the AutoGen process, just before its job).
- Two plain processes (``ProcessPoolExecutor(2)``, no framework): the most that 2 cores give
  right now, which a loaded machine may hold well under 2x.

Each repeat runs sequential, AutoGen and raytroupe back to back, so that load from elsewhere
hits them alike; figures are medians. The CPU time of the local Ray's processes is counted per
job (Linux ``/proc``): on 2 cores the job cannot take less than half of it.

Usage: python bench/cpu_tools.py [--quick] [--json PATH]
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import IO, Any, TypeVar

import _cpu_work
from _common import Curve, Figure, Section, machine, main, median

from raytroupe import runtime
from raytroupe.actors.tools.config import FunctionTool
from raytroupe.actors.tools.isolation import Isolation
from raytroupe.protocols import PlannedSubtask, TeamSpec, ToolCall

N = 8
WORK_S = 0.2
GOAL = 1.8
AGENTS = 2
CURVE_NS = (2, 4, 8, 16)
AUTOGEN_CORE = "autogen-core==0.7.5"
HERE = Path(__file__).resolve().parent
AUTOGEN_VENV = HERE / ".venv-autogen"
AUTOGEN_SCRIPT = HERE / "_autogen_cpu.py"
T = TypeVar("T")


def _calibrate() -> int:
    """Iterations of ``spin`` that take about ``WORK_S`` here (the median of several tries).

    The speed of this machine's cores drifts with its load: the notes give the time a call
    actually took during the run (sequential / N).
    """
    probe = 500_000
    times = []
    for _ in range(7):
        start = time.perf_counter()
        _cpu_work.spin(probe)
        times.append(time.perf_counter() - start)
    return round(probe * WORK_S / median(times))


def _autogen_python() -> Path:
    """The AutoGen environment's interpreter; the environment is created on first use.

    It is built from this interpreter's base Python, so both sides run the same version.
    """
    python = AUTOGEN_VENV / "bin" / "python"
    if python.exists():
        check = [str(python), "-c", "import autogen_core"]
        if subprocess.run(check, capture_output=True, check=False).returncode == 0:  # noqa: S603 - our venv
            return python
    base = getattr(sys, "_base_executable", sys.executable)
    print(f"creating {AUTOGEN_VENV} with {AUTOGEN_CORE} (first use)", file=sys.stderr)
    subprocess.run([base, "-m", "venv", str(AUTOGEN_VENV)], check=True)  # noqa: S603 - fixed argv
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, AUTOGEN_CORE], check=True)  # noqa: S603 - fixed argv
    return python


class _AutoGen:
    """The AutoGen process: a JSON request line in, a line of times out (see its script)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(  # noqa: S603 - our own script in our own venv
            [str(_autogen_python()), str(AUTOGEN_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=HERE,
        )
        self.hello = self._read()

    def _pipe(self, pipe: IO[str] | None) -> IO[str]:
        if pipe is None:
            raise RuntimeError("the AutoGen process has no pipes")
        return pipe

    def _read(self) -> dict[str, Any]:
        line = self._pipe(self._proc.stdout).readline()
        if not line:
            raise RuntimeError(f"the AutoGen process ended (exit {self._proc.wait()})")
        data: dict[str, Any] = json.loads(line)
        return data

    def run(self, n: int, iterations: int) -> dict[str, float]:
        """N sequential calls, then AutoGen jobs of N: ``sequential_s``, ``tool_s``, ``plain_s``."""
        stdin = self._pipe(self._proc.stdin)
        stdin.write(json.dumps({"n": n, "iterations": iterations}) + "\n")
        stdin.flush()
        return {key: float(seconds) for key, seconds in self._read().items()}

    def close(self) -> None:
        """End the process (it stops at the end of its input)."""
        self._pipe(self._proc.stdin).close()
        self._proc.wait(timeout=30)


class _CpuMeter:
    """CPU seconds used by the processes started after it here: the local Ray's (``/proc``).

    Counted by process kind: ``ray::ToolSandbox``, ``ray::MessageRouter``, ``raylet``...
    """

    def __init__(self) -> None:
        self._tick = os.sysconf("SC_CLK_TCK")
        self._exclude: set[int] = set()
        self._exclude = set(self._snapshot())
        self.by_kind: dict[str, float] = {}

    def _snapshot(self) -> dict[int, tuple[float, str]]:
        if not Path("/proc/self/stat").exists():
            return {}  # not Linux: nothing counted
        parents: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                parents.setdefault(int(stat[1]), []).append(int(entry))
        seen: dict[int, tuple[float, str]] = {}
        todo = list(parents.get(os.getpid(), []))
        while todo:
            pid = todo.pop()
            if pid in self._exclude:
                continue
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            seen[pid] = ((int(stat[11]) + int(stat[12])) / self._tick, _kind(argv.split("\0")))
            todo += parents.get(pid, [])
        return seen

    def settle(self, quiet: float = 0.1, within_s: float = 60.0) -> float:
        """Wait for a second in which the local Ray uses under ``quiet`` s of CPU; return it.

        A fresh Ray's processes keep importing and starting for a while after the first job.
        """
        deadline = time.monotonic() + within_s
        while True:
            before = self._snapshot()
            time.sleep(1.0)
            after = self._snapshot()
            used = sum(s - before.get(pid, (s, ""))[0] for pid, (s, _) in after.items())
            if used < quiet or time.monotonic() > deadline:
                return used

    def measure(self, job: Callable[[], T]) -> T:
        """Run ``job()``, adding the CPU it (and anything else of the local Ray) used."""
        before = self._snapshot()
        result = job()
        for pid, (seconds, kind) in self._snapshot().items():
            used = seconds - before.get(pid, (0.0, kind))[0]
            self.by_kind[kind] = self.by_kind.get(kind, 0.0) + used
        return result


def _kind(argv: list[str]) -> str:
    """``ray::Router`` for a Ray worker (its title, method dropped), else the program's name."""
    if argv[0].startswith("ray::"):
        return argv[0].split()[0].split(".")[0]
    script = next((a for a in argv[1:] if a.endswith(".py")), argv[0])
    return Path(script).name


def _two_processes(pool: ProcessPoolExecutor, n: int, iterations: int) -> float:
    """N calls of ``spin`` spread over the pool's two processes: the wall time."""
    start = time.perf_counter()
    list(pool.map(_cpu_work.spin, [iterations] * n, range(1, n + 1)))
    return time.perf_counter() - start


def _python_code(iterations: int, seed: int) -> str:
    """A program for the isolated python tool: ``spin``'s own source, then the call."""
    return f"{inspect.getsource(_cpu_work.spin)}\nprint(spin({iterations}, {seed}))\n"


def _team(n: int, iterations: int, tool: str, jobs: int, agents: int = AGENTS) -> TeamSpec:
    """``agents`` agents sharing N subtasks (one ``tool`` call each), for ``jobs`` jobs.

    Each agent's scripted model answers its subtasks' first turns with the tool calls, then
    their second turns with final answers: a job's first turns all come before any second one
    (a call takes ``WORK_S``, and :func:`_job` checks that every subtask made one). The team
    is the same for every job, so its models stay loaded, as a real team's would.
    """
    per_agent = n // agents
    models: dict[str, Any] = {}
    members, plan = [], []
    for a in range(agents):
        calls = []
        for k in range(per_agent):
            seed = a * per_agent + k + 1
            arguments: dict[str, Any] = (
                {"iterations": iterations, "seed": seed}
                if tool == "spin"
                else {"code": _python_code(iterations, seed)}
            )
            calls.append(ToolCall(call_id=f"c{seed}", tool=tool, arguments=arguments))
        alias = f"cpu-{tool}-n{n}-a{agents}-m{a}"
        turns = tuple(runtime.ScriptedTurn(tool_calls=(c,)) for c in calls)
        turns += tuple(runtime.ScriptedTurn(text="piece computed") for _ in calls)
        models[alias] = runtime.ScriptedModel(turns=turns * jobs)
        members.append(
            runtime.AgentSpec(
                name=f"cpu-{tool}-a{agents}-w{a}",
                role=f"w{a}",
                model=alias,
                tools=(tool,),
                max_turns=2,
                max_concurrency=per_agent,
                memory=runtime.MemoryPolicy(recall=False, write_results=False),
            )
        )
        plan += [
            PlannedSubtask(id=f"s{a}-{k}", role=f"w{a}", instructions=f"Compute piece {k}.")
            for k in range(per_agent)
        ]
    return TeamSpec(
        name=f"cpu-{tool}-n{n}-a{agents}",
        agents=tuple(members),
        models=models,
        planner_model="offline",
        max_parallel=n,
        max_subtasks=n,
        plan=tuple(plan),
    )


def _job(rt: runtime.Runtime, team: TeamSpec) -> tuple[float, runtime.JobResult, int]:
    """One job: the driver's wall time from submission to result, the result, failed calls.

    Raises:
        RuntimeError: a subtask did not make exactly one tool call.
    """
    n = len(team.plan or ())
    start = time.perf_counter()
    result = rt.submit(f"Compute {n} pieces.", team=team).result(timeout=300)
    took = time.perf_counter() - start
    calls = [s for s in result.trace if s.kind == "tool_call"]
    if len(calls) != n or any(s.tool_calls != 1 for s in result.subtasks):
        raise RuntimeError(f"expected {n} subtasks of one tool call each: {result.subtasks}")
    return took, result, sum(1 for s in calls if not s.attributes.get("ok"))


def _measure(
    rt: runtime.Runtime,
    autogen: _AutoGen,
    meter: _CpuMeter,
    pool: ProcessPoolExecutor,
    *,
    n: int,
    iterations: int,
    repeats: int,
    tools: list[str],
) -> dict[str, float]:
    """Medians (s) by side over interleaved repeats, after one warm-up of each.

    A job with a failed tool call is left out (its call ended early), and counted in
    ``failed/<tool>``; the function tool's must never fail.
    """
    sides = ["sequential", "autogen_tool", "autogen_plain", "processes", *tools]
    times: dict[str, list[float]] = {side: [] for side in sides}
    times["dispatch"], times["provision"] = [], []
    failed = dict.fromkeys(tools, 0)
    teams = {tool: _team(n, iterations, tool, repeats + 1) for tool in tools}
    for attempt in range(repeats + 1):
        autogen_times = autogen.run(n, iterations)
        processes = _two_processes(pool, n, iterations)
        ran = {}
        for tool, team in teams.items():
            job = functools.partial(_job, rt, team)
            ran[tool] = meter.measure(job) if tool == "spin" and attempt else job()
            failed[tool] += 1 if ran[tool][2] else 0
        if ran["spin"][2]:
            raise RuntimeError(f"{ran['spin'][2]} function tool call(s) failed")
        if attempt == 0:  # warm-up: agents spawned, the function imported, caches filled
            meter.settle()
            continue
        times["sequential"].append(autogen_times["sequential_s"])
        times["autogen_tool"].append(autogen_times["tool_s"])
        times["autogen_plain"].append(autogen_times["plain_s"])
        times["processes"].append(processes)
        for tool, (took, _, broken) in ran.items():
            if not broken:
                times[tool].append(took)
        times["dispatch"].append(ran["spin"][1].timings.dispatch_s)
        times["provision"].append(ran["spin"][1].timings.provision_s)
    medians = {side: median(values) for side, values in times.items() if values}
    medians["autogen"] = min(medians["autogen_tool"], medians["autogen_plain"])
    return medians | {f"failed/{tool}": float(count) for tool, count in failed.items()}


def _figures(m: dict[str, float]) -> list[Figure]:
    figures = [
        Figure(f"N={N}: speedup, raytroupe (function tool) vs AutoGen (its faster way)",
               m["autogen"], m["spin"], "s", "raytroupe", GOAL),
        Figure(f"N={N}: speedup, raytroupe (function tool) vs sequential", m["sequential"],
               m["spin"], "s", "raytroupe"),
        Figure(f"N={N}: AutoGen, FunctionTool in handlers, vs sequential (overhead)",
               m["autogen_tool"], m["sequential"], "s", "sequential"),
        Figure(f"N={N}: AutoGen, handlers calling spin, vs sequential (overhead)",
               m["autogen_plain"], m["sequential"], "s", "sequential"),
        Figure(f"N={N}: speedup, 2 plain processes vs sequential (the machine's ceiling)",
               m["sequential"], m["processes"], "s", "2 processes"),
        Figure(f"N={N}: raytroupe (function tool) vs 2 plain processes", m["spin"],
               m["processes"], "s", "2 processes"),
    ]  # fmt: skip
    if "python" in m:
        figures += [
            Figure(f"N={N}: speedup, raytroupe (isolated python tool) vs AutoGen (faster way)",
                   m["autogen"], m["python"], "s", "raytroupe python"),
            Figure(f"N={N}: speedup, raytroupe (isolated python tool) vs sequential",
                   m["sequential"], m["python"], "s", "raytroupe python"),
        ]  # fmt: skip
    return figures


def _curve(by_n: dict[int, dict[str, float]]) -> Curve:
    def ratio(top: str, bottom: str) -> list[tuple[float, float]]:
        return [(n, t[top] / t[bottom]) for n, t in by_n.items()]

    series = {
        "AutoGen (faster way) / raytroupe (function tool)": ratio("autogen", "spin"),
        "sequential / raytroupe (function tool)": ratio("sequential", "spin"),
        "sequential / AutoGen (faster way)": ratio("sequential", "autogen"),
        "sequential / 2 plain processes": ratio("sequential", "processes"),
    }
    if all("python" in t for t in by_n.values()):
        series["AutoGen (faster way) / raytroupe (isolated python)"] = ratio("autogen", "python")
    return Curve(
        title=f"CPU-bound fan-out, N x {WORK_S * 1e3:.0f} ms, 2 cores: speedup",
        x_label="subtasks N",
        y_label="speedup (x)",
        series=series,
        log_x=True,
        goal=GOAL,
    )


def run(quick: bool) -> Section:
    """The figures at N = 8; with the curve over N unless ``quick``."""
    repeats = 3 if quick else 5
    ns = (N,) if quick else CURVE_NS
    section = Section(title=f"CPU-bound tools: fan-out of N x {WORK_S * 1e3:.0f} ms pure Python")
    load_before = machine()["load"]
    iterations = _calibrate()
    isolated, why_not = Isolation().probe()
    tools = ["spin", "python"] if isolated else ["spin"]
    pool = ProcessPoolExecutor(2)  # forked before Ray starts, warmed outside the measure
    _two_processes(pool, 2, 1000)
    autogen = _AutoGen()
    meter = _CpuMeter()  # counts the processes started from now on: the local Ray's
    by_n: dict[int, dict[str, float]] = {}
    cpu: dict[str, float] = {}
    # workers log at warning too (runtime.connect's log_level sets the driver's only)
    os.environ.setdefault("TROUPE_LOG_LEVEL", "warning")
    with tempfile.TemporaryDirectory(prefix="cpu-tools-") as tmp:
        root = Path(tmp)
        rt = runtime.connect(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            log_level="warning",
            journal=root / "journal.sqlite",
            memory_config=runtime.MemoryConfig(path=root / "memory", embedding="hashing"),
            tools_config=runtime.ToolsConfig(
                sandboxes=2,
                state_dir=root / "state",
                scratch_root=root / "scratch",
                functions={"spin": FunctionTool(target="_cpu_work:spin", timeout_s=120.0)},
            ),
        )
        try:
            for n in ns:
                if n == N:
                    meter.by_kind.clear()  # CPU counted at N only
                by_n[n] = _measure(rt, autogen, meter, pool, n=n, iterations=iterations,
                                   repeats=repeats, tools=tools)  # fmt: skip
                if n == N:
                    cpu = {kind: used / repeats for kind, used in meter.by_kind.items()}
        finally:
            rt.shutdown()
            autogen.close()
            pool.shutdown()
    m = by_n[N]
    section.figures += _figures(m)
    if not isolated:
        section.notes.append(f"isolated python tool not measured: {why_not}")
    section.notes.append(
        f"N={N} medians (s): sequential {m['sequential']:.3f} (ideal on 2 cores "
        f"{m['sequential'] / 2:.3f}; 2 plain processes {m['processes']:.3f}), AutoGen "
        f"FunctionTool {m['autogen_tool']:.3f}, AutoGen plain handlers "
        f"{m['autogen_plain']:.3f}, raytroupe function tool "
        f"{m['spin']:.3f} (provision {m['provision']:.3f}, dispatch {m['dispatch']:.3f})"
        + (f", raytroupe isolated python {m['python']:.3f}" if "python" in m else "")
    )
    work = cpu.pop("ray::ToolSandbox", 0.0)
    rest = sorted(cpu.items(), key=lambda kv: -kv[1])
    floor = (work + sum(cpu.values())) / 2
    if floor > 0:  # counted where /proc exists
        section.notes.append(
            f"N={N} CPU per raytroupe job (function tool): sandboxes {work:.3f} s (the work), "
            f"the rest of the local Ray {sum(cpu.values()):.3f} s ("
            + ", ".join(f"{kind} {used:.3f}" for kind, used in rest[:8])
            + f"); on 2 cores the job cannot take less than {floor:.3f} s, so the speedup vs "
            f"AutoGen's faster way cannot pass {m['autogen'] / floor:.2f}x in this run"
        )
    failures = {n: int(t["failed/python"]) for n, t in by_n.items() if t.get("failed/python")}
    if failures:
        section.notes.append(
            f"isolated python tool: jobs with a failed call, left out of the medians, by N: "
            f"{failures} (the trace keeps only the error code, 'tool')"
        )
    if len(ns) > 1:
        section.curves.append(_curve(by_n))
        section.notes.append(
            "medians (s) by N: "
            + "; ".join(
                f"{n}: sequential {t['sequential']:.2f}, 2 processes {t['processes']:.2f}, "
                f"AutoGen {t['autogen_tool']:.2f} / {t['autogen_plain']:.2f} (tool / plain), "
                f"raytroupe {t['spin']:.2f}"
                + (f", isolated python {t['python']:.2f}" if "python" in t else "")
                for n, t in by_n.items()
            )
        )
    python_version = subprocess.run(  # noqa: S603 - the interpreter the python tool runs
        [Isolation().python, "--version"], capture_output=True, text=True, check=False
    ).stdout.split()[-1:]
    section.notes.append(
        f"work: spin({iterations:,}), {m['sequential'] / N * 1e3:.0f} ms a call during the "
        f"run (calibrated for {WORK_S * 1e3:.0f} ms); the isolated python tool runs it on the "
        f"system interpreter (Python {' '.join(python_version) or '?'}); team of "
        f"{AGENTS} agents; worker logs at {os.environ['TROUPE_LOG_LEVEL']}; {repeats} "
        f"interleaved repeats after a warm-up; AutoGen "
        f"{autogen.hello['autogen_core']} on Python {autogen.hello['python']}; load before "
        f"{load_before}, after {machine()['load']}"
    )
    return section


if __name__ == "__main__":
    main(run)
