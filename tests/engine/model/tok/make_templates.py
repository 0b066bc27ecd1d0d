#!/usr/bin/env python3
"""Golden chat-template renderings made with jinja2 (run by hand; outputs committed).

    tests/engine/model/tok/make_templates.py

Reads tests/engine/model/tok/templates/*.jinja (one example template per family, and
smollm2.jinja and phi3-v1.jinja written here from the tokenizer.chat_template
of the SmolLM2 GGUF and of the shared suite's Phi-3 vocabulary; gemma4.jinja
is the template of llama.cpp's models/ggml-vocab-gemma-4.gguf; deepseek-r1.jinja is
DeepSeek-R1-Distill-Llama-8B's, as llama.cpp's models/templates keeps it;
the Gemma 3 GGUF carries no template, so gemma.jinja is Gemma 3's published
one) and renders each conversation below with and without
add_generation_prompt, in the environment Hugging Face uses for chat
templates (sandboxed, trim_blocks, lstrip_blocks, raise_exception).
Writes tests/engine/model/tok/templates/golden.json: the conversations and, per case,
the exact text or null where the template raises.
"""
import datetime, json, os, subprocess
import gguf
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.exceptions import TemplateError

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
TDIR = os.path.join(HERE, 'templates')

BEGIN_DS = '<\uff5cbegin\u2581of\u2581sentence\uff5c>'
END_DS = '<\uff5cend\u2581of\u2581sentence\uff5c>'
# template file -> (family tern must detect, bos_token, eos_token)
TEMPLATES = {
    'chatml': ('chatml', '', '<|im_end|>'),
    'smollm2': ('chatml', '<|im_start|>', '<|im_end|>'),
    'llama3': ('llama3', '<|begin_of_text|>', '<|eot_id|>'),
    'llama2': ('llama2', '<s>', '</s>'),
    'mistral': ('mistral', '<s>', '</s>'),
    'gemma': ('gemma', '<bos>', '<eos>'),
    'phi3': ('phi3', '<s>', '<|endoftext|>'),
    'phi3-v1': ('phi3', '<s>', '<|endoftext|>'),
    'zephyr': ('zephyr', '<s>', '</s>'),
    'deepseek': ('deepseek', BEGIN_DS, END_DS),
    'gemma4': ('gemma4', '<bos>', '<eos>'),
    'deepseek-r1': ('deepseek-r1', BEGIN_DS, END_DS),
}
CONVS = [
    [{'role': 'user', 'content': 'Hello!'}],
    [{'role': 'system', 'content': 'You are terse.'}, {'role': 'user', 'content': 'What is 2+2?'}],
    [{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello! How can I help?'},
     {'role': 'user', 'content': 'Tell me a joke.'}],
    [{'role': 'system', 'content': '  Be kind.\n'}, {'role': 'user', 'content': '  padded question \n\n'},
     {'role': 'assistant', 'content': '\tpadded answer  '}, {'role': 'user', 'content': 'Ünïcödé 日本語 🦙'}],
    [{'role': 'user', 'content': 'a'}, {'role': 'user', 'content': 'b'}],
    [],
    [{'role': 'user', 'content': 'Why?'},
     {'role': 'assistant', 'content': '<|channel>thought\nLet me think.<channel|> Because. '},
     {'role': 'user', 'content': 'OK'}],
    [{'role': 'system', 'content': 'Think first.'}, {'role': 'user', 'content': '2+2?'},
     {'role': 'assistant', 'content': '<think>\nadd them\n</think>\n\n4'},
     {'role': 'user', 'content': 'And 3+3?'}],
]


def model_path(name):
    return subprocess.check_output([os.path.join(ROOT, 'packaging', 'fetch-model'), '--model',
                                    name, '--print-path'], text=True).strip()


def raise_exception(msg):
    raise TemplateError(msg)


def main():
    shared = os.path.join(ROOT, '..', 'shared')
    for name, path in (('smollm2', model_path('smollm2')),
                       ('phi3-v1', os.path.join(shared, 'tokenizer-suite', 'ggml-vocab-phi-3.gguf'))):
        f = gguf.GGUFReader(path).fields['tokenizer.chat_template']
        with open(os.path.join(TDIR, name + '.jinja'), 'w') as out:
            out.write(bytes(f.parts[-1]).decode())
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals['raise_exception'] = raise_exception
    env.globals['strftime_now'] = lambda fmt: datetime.date(2026, 1, 1).strftime(fmt)
    cases = []
    for name, (family, bos, eos) in TEMPLATES.items():
        tmpl = env.from_string(open(os.path.join(TDIR, name + '.jinja')).read())
        for ci, conv in enumerate(CONVS):
            for agp in (False, True):
                try:
                    text = tmpl.render(messages=conv, add_generation_prompt=agp,
                                       bos_token=bos, eos_token=eos)
                except (TemplateError, IndexError):
                    text = None
                cases.append({'template': name, 'family': family, 'bos': bos, 'eos': eos,
                              'conv': ci, 'agp': agp, 'out': text})
    with open(os.path.join(TDIR, 'golden.json'), 'w') as out:
        json.dump({'conversations': CONVS, 'cases': cases}, out, ensure_ascii=False, indent=0)
    print('%d cases' % len(cases))


if __name__ == '__main__':
    main()
