"""A raytroupe team as the model of another program's tool loop, over the OpenAI API.

Usage: python examples/openai_tool_loop.py [--port PORT]

Starts raytroupe on an embedded local Ray with its HTTP app on 127.0.0.1 and an API key made
for this run, registers a one-agent team, then runs the loop any OpenAI-SDK framework runs
(the OpenAI Agents SDK, LangChain's ChatOpenAI): it offers its own function tool, runs the
call the team asks for, sends the result on, and prints the team's answer.

The team's model here is scripted (offline: no key, no network), so what this shows is the
shape of the exchange; with a real model the agent decides from the tool's description.
"""

from __future__ import annotations

import json
from typing import Any

import openai
from http_app import port_argument, served
from openai.types.chat import ChatCompletionFunctionToolParam

from raytroupe import runtime

TEAM = "weather-desk"
WEATHER: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def get_weather(city: str) -> str:
    """The caller's own tool (a real one would ask a weather service)."""
    return {"Paris": "18 C, clear", "Oslo": "4 C, rain"}.get(city, "unknown")


def loop(url: str, key: str) -> None:
    """Ask, run each call the team asks for, send the results on, until it answers."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    for _ in range(4):
        choice = client.chat.completions.create(
            model=TEAM, messages=messages, tools=[WEATHER]
        ).choices[0]
        print(f"finish_reason: {choice.finish_reason}")
        messages.append(choice.message.model_dump(exclude_none=True))
        if choice.finish_reason != "tool_calls":
            print(f"answer: {choice.message.content}")
            return
        for call in choice.message.tool_calls or ():
            arguments = json.loads(call.function.arguments)  # type: ignore[union-attr]
            result = get_weather(**arguments)
            print(f"  the team asks for {call.function.name}({arguments}): {result}")  # type: ignore[union-attr]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def main() -> None:
    """Start raytroupe and its HTTP app, then run the tool loop against a team."""
    port = port_argument(__doc__)
    asks = json.dumps({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})
    answer = "It is 18 C and clear in Paris."
    scripted = runtime.ScriptedModel(
        turns=(runtime.ScriptedTurn(text=asks), runtime.ScriptedTurn(text=answer))
    )
    with served("tools-example", port) as (rt, url, key):
        rt.put_team(runtime.Team(
            name=TEAM, models={"desk": scripted},
            agents=[runtime.AgentSpec(name="desk", role="forecaster", model="desk")],
        ).spec())  # fmt: skip
        print(f"HTTP app at {url}; the team {TEAM!r} is the model at {url}/v1\n")
        loop(url, key)


if __name__ == "__main__":
    main()
