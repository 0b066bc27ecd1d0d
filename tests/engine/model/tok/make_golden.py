#!/usr/bin/env python3
"""Golden token ids for the real models, made by the reference engine.

Run by hand (outputs are committed):
    tests/engine/model/tok/make_golden.py [--shared ../shared]

Writes tests/engine/model/tok/golden/inputs/*.txt (our own texts: code, emoji, whitespace
runs, mixed scripts, invalid UTF-8, special-token text) and, per model,
tests/engine/model/tok/golden/<model>.ids with one line per (text, flags):
    SRC NAME FLAGS N ids...          (N <= 512: the ids themselves)
    SRC NAME FLAGS N # h1 h2 ...     (longer: FNV-1a 64 of each 512-id chunk,
                                      over the ids as little-endian int32)
SRC is 'shared' (../shared/texts) or 'own' (golden/inputs); FLAGS is '-' or
a combination of 'b' (add BOS as the model says) and 's' (parse special).

The reference is llama.cpp: the Python package llama_cpp when importable
(Llama(model_path, vocab_only=True).tokenize(bytes, add_bos, special)),
else the llama-tokenize binary of the same build ($LLAMA_TOKENIZE or the
default path below).
"""
import argparse, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
GOLD = os.path.join(HERE, 'golden')
LLAMA_TOKENIZE = os.environ.get('LLAMA_TOKENIZE',
    '/tmp/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-tokenize')

OWN = {
    'code-c': b'#include <stdio.h>\n\nint main(int argc, char **argv)\n{\n\tfor (int i = 0; i < argc; i++)\n\t\tprintf("%d: %s\\n", i, argv[i]);\n\treturn 0;\n}\n',
    'code-py': b'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint([fib(i) for i in range(10)])  # 0 1 1 2 3 5 8 13 21 34\n',
    'code-json': b'{"model": "SmolLM2", "ctx": 8192, "layers": [1, 2, 3], "ok": true, "x": null}\n',
    'emoji': 'Emoji: \U0001F600\U0001F603 \U0001F44D\U0001F3FD \U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 \U0001F1EF\U0001F1F5\U0001F1FA\U0001F1F8 \u2764\ufe0f \U0001F999\U0001F999 \u2705!'.encode(),
    'whitespace': b'a  b   c    d\t\te\n\nf\n\n\n g \t \n  h' + b' ' * 17 + b'i' + b'\t' * 9 + b'\n' * 7 + b'   \r\n\r\n  end  ',
    'only-spaces': b'                ',
    'mixed-scripts': 'English, Ελληνικά, Русский, עברית, العربية, हिन्दी, ไทย, 日本語のテキスト, 한국어 텍스트, 中文文本, Tiếng Việt, Ωmega ß Æ ﬁ ǅ.'.encode(),
    'numbers': b'3.14159 2,718 1e-9 0x1F 1000000 12345678901234567890 v1.2.3 42% $5.99 -7 +8',
    'contractions': b"I'm sure you'll see they've said it's done; WE'LL SEE, HE'S IT'D 'RE 'VE 'S 'M 'T",
    'markup': b'<div class="x">Hello &amp; <b>bye</b></div>\n# Title\n* item **bold** _it_ `code` [link](https://example.com/a?b=c&d=e)\n',
    'special-text': b'<|im_start|>user\nHi<|im_end|>\n<start_of_turn>model\nYo<end_of_turn>\n<s></s><bos><eos><|endoftext|>',
    'repeats': b'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa ==================== ........ !!!!!!!!!!!!',
    'invalid-utf8': b'ok \xff bad \xe2\x82 cut \xc0\xaf overlong \xed\xa0\x80 surrogate \xf8\x88 five \x80\x80 cont \xe2\x82\xac euro \xf0\x9f\x98 end\xc3',
    'nul-and-controls': b'a\x00b\x01c\x1fd\x7fe\x0bf\x0cg\x1c\x1d\x1e',
    'unicode-spaces': 'a\u00a0b\u2003c\u3000d\u2028e\u0085f\u200bg\u180eh\ufeffi'.encode(),
    'empty': b'',
}
# (name, flags) pairs checked with flags other than '-'
FLAGGED = [('special-text', 's'), ('special-text', 'bs'), ('code-py', 'b')]
SHARED_TEXTS = ['gpl-3.0.txt', 'zh-inference-guide.txt', 'ru-inference-guide.txt']
MODELS = {'smollm2': 'smollm2', 'gemma3': 'gemma3-270m'}


def model_path(name):
    return subprocess.check_output([os.path.join(ROOT, 'packaging', 'fetch-model'), '--model',
                                    name, '--print-path'], text=True).strip()


class Ref:
    def __init__(self, path):
        self.path = path
        try:
            import llama_cpp
            self.llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
            self.kind = 'llama_cpp %s' % llama_cpp.__version__
        except ImportError:
            self.llm = None
            self.kind = 'llama-tokenize binary'

    def tokenize(self, data, bos, special):
        if self.llm is not None:
            return self.llm.tokenize(data, add_bos=bos, special=special)
        with tempfile.NamedTemporaryFile(delete=False) as f:
            f.write(data)
        try:
            args = [LLAMA_TOKENIZE, '-m', self.path, '-f', f.name, '--ids', '--no-escape',
                    '--log-disable']
            if not special:  # llama-tokenize parses special text by default
                args.append('--no-parse-special')
            if not bos:
                args.append('--no-bos')
            out = subprocess.check_output(args, stderr=subprocess.DEVNULL, text=True)
        finally:
            os.unlink(f.name)
        line = [l for l in out.splitlines() if l.startswith('[')][-1]
        return [int(x) for x in line.strip('[]').split(',') if x.strip()]


def fnv(ids):
    h = 1469598103934665603
    for i in ids:
        for b in int(i).to_bytes(4, 'little', signed=True):
            h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def line(src, name, flags, ids):
    if len(ids) <= 512:
        body = ' '.join(str(i) for i in ids)
    else:
        body = '# ' + ' '.join('%016x' % fnv(ids[k:k + 512]) for k in range(0, len(ids), 512))
    return ('%s %s %s %d %s' % (src, name, flags, len(ids), body)).rstrip() + '\n'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--shared', default=os.path.join(ROOT, '..', 'shared'))
    a = ap.parse_args()
    for name, data in OWN.items():
        with open(os.path.join(GOLD, 'inputs', name + '.txt'), 'wb') as f:
            f.write(data)
    for key, fetch in MODELS.items():
        ref = Ref(model_path(fetch))
        out = ['# %s ids from the reference engine (%s); see tests/engine/model/tok/make_golden.py\n'
               % (key, ref.kind)]
        for t in SHARED_TEXTS:
            data = open(os.path.join(a.shared, 'texts', t), 'rb').read()
            out.append(line('shared', t, '-', ref.tokenize(data, False, False)))
        for name, data in OWN.items():
            out.append(line('own', name + '.txt', '-', ref.tokenize(data, False, False)))
        for name, flags in FLAGGED:
            ids = ref.tokenize(OWN[name], 'b' in flags, 's' in flags)
            out.append(line('own', name + '.txt', flags, ids))
        with open(os.path.join(GOLD, key + '.ids'), 'w') as f:
            f.writelines(out)
        print('%s: %d lines (%s)' % (key, len(out) - 1, ref.kind))


if __name__ == '__main__':
    sys.exit(main())
