"""test_agents: an agent framework from PyPI (the `openai-agents` SDK) completes
tool-using tasks against a real tern serve on the default model, through its
Chat Completions model over the official AsyncOpenAI client: the tool is
called with arguments the SDK's own pydantic model accepts, its result goes
back as a `role: tool` message, and the run ends with a final answer; plain
and streamed (Runner.run_streamed: the SDK's event stream over
delta.tool_calls chunks)."""
import asyncio
import time

import openai
from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool,
                    set_tracing_disabled)
from agents.items import MessageOutputItem, ToolCallItem, ToolCallOutputItem

from serve_lib import TIME_SCALE, Server, diag, done, ok

set_tracing_disabled(True)   # the SDK would post traces to OpenAI's servers
srv = Server()
sync = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0)
mid = sync.models.list().data[0].id


def model():
    # a client per event loop: the async client's connections belong to the
    # loop that opened them (each Runner.run_sync runs its own)
    client = openai.AsyncOpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0,
                                timeout=120 * TIME_SCALE)
    return OpenAIChatCompletionsModel(model=mid, openai_client=client)


calls = []


@function_tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    calls.append(city)
    return f"It is sunny and 21 C in {city}."


def agent(behaviour):
    # tool_choice required: tern decodes the call under the tool's grammar,
    # so even a 135M model calls it well-formed; the SDK resets the choice
    # to auto after the call (reset_tool_choice), so run_llm_again ends
    # with a text answer.
    return Agent(name="weather", instructions="You answer questions about the weather. "
                 "Use the tools.", tools=[get_weather], model=model(), tool_use_behavior=behaviour,
                 model_settings=ModelSettings(tool_choice="required", temperature=0,
                                              max_tokens=96))


def kinds(result):
    return [type(i) for i in result.new_items]


QUESTION = "What is the weather in Paris?"

# 1. The tool's result is the answer (stop_on_first_tool).
calls.clear()
t0 = time.monotonic()
r = Runner.run_sync(agent("stop_on_first_tool"), QUESTION, max_turns=4)
diag(f"stop_on_first_tool: {r.final_output!r}, calls {calls}, {time.monotonic() - t0:.2f} s")
ok(len(calls) == 1 and isinstance(calls[0], str) and calls[0].strip() != "",
   "stop_on_first_tool: the tool ran once with a non-empty city")
ok(r.final_output == f"It is sunny and 21 C in {calls[0] if calls else ''}.",
   "stop_on_first_tool: the final output is the tool's result")
ok(kinds(r) == [ToolCallItem, ToolCallOutputItem], "stop_on_first_tool: a call, then its output")

# 2. The whole loop: call, result back to the model as a tool message, answer.
calls.clear()
r = Runner.run_sync(agent("run_llm_again"), QUESTION, max_turns=4)
diag(f"run_llm_again: {r.final_output!r}, calls {calls}")
k = kinds(r)
ok(len(calls) >= 1 and k[:2] == [ToolCallItem, ToolCallOutputItem],
   "run_llm_again: the tool was called and its output recorded")
ok(k[-1] is MessageOutputItem and isinstance(r.final_output, str) and r.final_output.strip(),
   "run_llm_again: the run ends with a text answer after the tool result")
# the second request carried the tool result: the model saw it (its reply,
# whatever a 135M model makes of it, came from a conversation with 3+ turns)
ok(len(r.raw_responses) >= 2, "run_llm_again: two model calls (before and after the tool)")


# 3. Streamed: the SDK's event stream over tern's SSE chunks.
async def streamed():
    calls.clear()
    s = Runner.run_streamed(agent("run_llm_again"), QUESTION, max_turns=4)
    names = []
    async for ev in s.stream_events():
        if ev.type == "run_item_stream_event":
            names.append(ev.name)
    return s, names


s, names = asyncio.run(streamed())
diag(f"streamed: {s.final_output!r}, events {names}, calls {calls}")
ok("tool_called" in names and "tool_output" in names and "message_output_created" in names,
   "streamed: tool_called, tool_output and message_output_created events")
ok(len(calls) >= 1 and isinstance(s.final_output, str) and s.final_output.strip(),
   "streamed: the tool ran and the run ended with an answer")
done()
