#!/usr/bin/env python3
"""Golden renderings of conversations with tools, made with jinja2 (run by hand; output committed).

    tests/engine/model/tok/make_tool_templates.py DIR

DIR holds the published chat templates, as their model repositories ship
them (not copied into tern; llama.cpp keeps the same texts under
models/templates/):
    llama3.2.jinja       meta-llama/Llama-3.2-3B-Instruct (3.1 and 3.3 differ only in the
                         date line and built-in tools, which tern never sets)
    mistral-nemo.jinja   mistralai/Mistral-Nemo-Instruct-2407 (Mistral v3 tekken)
    mistral-v0.3.jinja   mistralai/Mistral-7B-Instruct-v0.3 (the same with spaces after
                         [INST], [AVAILABLE_TOOLS], [TOOL_CALLS], [TOOL_RESULTS] and a trimmed,
                         space-led assistant turn)
    mistral-small3.1.jinja  mistralai/Mistral-Small-3.1-24B-Instruct-2503 (v7: [SYSTEM_PROMPT];
                         tern reads its default system prompt and tool prompt from the
                         template text, so its markers are those literals: see V7_MARKERS)
    qwen2.5.jinja        Qwen/Qwen2.5-7B-Instruct (the generic Hermes format is its own)
    phi4-mini.jinja      llama.cpp's models/templates/llama-cpp-microsoft-Phi-4-mini-instruct.jinja
                         (microsoft/Phi-4-mini-instruct's own template renders neither
                         calls nor results; this fixed one is what llama.cpp serves)
Each is rendered as Hugging Face renders chat templates (sandboxed, trim_blocks,
lstrip_blocks, raise_exception, its tojson: json.dumps with ensure_ascii=False)
with the tools and messages as vLLM passes them (a call's "arguments" JSON
string read into the object it holds). Writes templates/golden_tools.json:
per case the template's markers (what tern detects it by), the OpenAI
conversation tern receives, and jinja2's text or null where the template
raises; the SHA-256 of each template text says which one was used.
"""
import copy, datetime, hashlib, json, os, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.exceptions import TemplateError

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, 'templates', 'golden_tools.json')

# name -> (family, bos, eos, markers: a text tern detects the same variant from)
TEMPLATES = {
    'llama3.2': ('llama3', '<|begin_of_text|>', '<|eot_id|>',
                 '<|start_header_id|><|end_header_id|> Environment: ipython '
                 'Cutting Knowledge Date strftime_now'),
    'mistral-nemo': ('mistral', '<s>', '</s>', '[INST] [AVAILABLE_TOOLS][ [TOOL_RESULTS]'),
    'qwen2.5': ('chatml', '', '<|im_end|>',
                "<|im_start|> '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
                "You are a helpful assistant.<|im_end|>\\n'"),
    'mistral-v0.3': ('mistral', '<s>', '</s>', '[INST] [AVAILABLE_TOOLS] [ [TOOL_RESULTS]'),
    'mistral-small3.1': ('mistral', '<s>', '</s>', None),
    'phi4-mini': ('phi3', '<|endoftext|>', '<|endoftext|>',
                  '<|system|> <|assistant|> <|end|> <|tool|> <|tool_call|>'),
}

WEATHER = {'type': 'function', 'function': {
    'name': 'get_weather', 'description': 'Current weather in a city',
    'parameters': {'type': 'object', 'properties': {
        'city': {'type': 'string', 'description': 'City name, e.g. "Paris"'},
        'unit': {'type': 'string', 'enum': ['celsius', 'fahrenheit']},
        'days': {'type': 'integer', 'enum': [1, 3, 7]}},
        'required': ['city'], 'additionalProperties': False}}}
TIME = {'type': 'function', 'function': {'name': 'get_time', 'parameters': {
    'type': 'object', 'properties': {'tz': {'type': 'string'}}}}}
NOARGS = {'type': 'function', 'function': {'name': 'ping'}}


def v7_markers(text):
    """The lines of the v7 template tern reads (its two prompts' literals) and its markers."""
    keep = [l for l in text.split('{%-') if 'set default_system_message' in l or
            'set parallel_tool_prompt' in l or 'set system_message = parallel_tool_prompt' in l]
    return '[SYSTEM_PROMPT] [INST] [AVAILABLE_TOOLS] [TOOL_RESULTS] ' + '{%-'.join([''] + keep)


def call(cid, name, args):
    return {'id': cid, 'type': 'function',
            'function': {'name': name, 'arguments': json.dumps(args, ensure_ascii=False)}}


SYS = {'role': 'system', 'content': 'You are a weather bot.'}
ASK = {'role': 'user', 'content': 'Weather in Zürich, 3 days?'}
CALL1 = {'role': 'assistant', 'content': None,
         'tool_calls': [call('a1B2c3D4e', 'get_weather', {'city': 'Zürich', 'days': 3, 'unit': 'celsius'})]}
RES1 = {'role': 'tool', 'tool_call_id': 'a1B2c3D4e', 'content': '{"temp": 21.5, "sky": "sunny \\"clear\\""}'}
ANS = {'role': 'assistant', 'content': 'Sunny, 21.5 °C.'}
CASES = [
    ([WEATHER], [ASK]),
    ([WEATHER, TIME], [SYS, ASK]),
    ([WEATHER], [SYS, ASK, CALL1, RES1]),
    ([WEATHER], [ASK, CALL1, RES1, ANS, {'role': 'user', 'content': 'And tomorrow?'}]),
    ([WEATHER, TIME, NOARGS], [SYS, {'role': 'user', 'content': '  Time and weather in Rome\n'},
                               {'role': 'assistant', 'content': None, 'tool_calls': [
                                   call('xYz987Abc', 'get_time', {'tz': 'Europe/Rome'}),
                                   call('Q1w2E3r4T', 'get_weather', {'city': 'Rome', 'ratio': 0.25,
                                                                     'big': 1e20, 'tiny': 1e-7})]},
                               {'role': 'tool', 'tool_call_id': 'xYz987Abc', 'content': '10:00'},
                               {'role': 'tool', 'tool_call_id': 'Q1w2E3r4T', 'content': 'rain\n\tcold'}]),
    (None, [SYS, ASK]),
    ([WEATHER], []),
    ([WEATHER], [SYS]),
]


def raise_exception(msg):
    raise TemplateError(msg)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def as_vllm(messages):
    """The messages as vLLM hands them to a template: arguments read as JSON."""
    out = copy.deepcopy(messages)
    for m in out:
        for tc in m.get('tool_calls') or []:
            tc['function']['arguments'] = json.loads(tc['function']['arguments'])
    return out


def main():
    tdir = sys.argv[1]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals['raise_exception'] = raise_exception
    env.globals['strftime_now'] = lambda fmt: datetime.date(2026, 1, 1).strftime(fmt)
    env.filters['tojson'] = tojson
    cases, sums = [], {}
    for name, (family, bos, eos, markers) in TEMPLATES.items():
        text = open(os.path.join(tdir, name + '.jinja')).read()
        if markers is None:
            markers = v7_markers(text)
        sums[name] = hashlib.sha256(text.encode()).hexdigest()
        tmpl = env.from_string(text)
        for ci, (tools, conv) in enumerate(CASES):
            for agp in (False, True):
                kw = {'tools': tools} if tools is not None else {}
                try:
                    out = tmpl.render(messages=as_vllm(conv), add_generation_prompt=agp,
                                      bos_token=bos, eos_token=eos, **kw)
                except (TemplateError, IndexError):
                    out = None
                cases.append({'template': name, 'family': family, 'bos': bos, 'eos': eos,
                              'markers': markers, 'today': '01 Jan 2026', 'tools': tools,
                              'messages': conv, 'case': ci, 'agp': agp, 'out': out})
    with open(OUT, 'w') as f:
        json.dump({'templates_sha256': sums, 'cases': cases}, f, ensure_ascii=False, indent=0)
    print('%d cases' % len(cases))


if __name__ == '__main__':
    main()
