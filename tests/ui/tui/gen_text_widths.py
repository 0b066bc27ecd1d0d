#!/usr/bin/env python3
"""Writes text_widths.txt: display widths of mixed-script strings computed by
the Python `wcwidth` package (an oracle independent of the C library's
wcwidth that ui/tui/text.c uses). Run by hand; the output is committed.

Format per line: <UTF-8 string> TAB <columns> TAB <code points>
"""
import os
from wcwidth import wcswidth

SAMPLES = [
    "hello, world",
    "你好，世界",                       # CJK ideographs and a full-width comma
    "Привет, мир",                      # Cyrillic
    "中文 and English mixed",
    "emoji 😀 and 🚀 rockets",
    "e\u0301te\u0301",                  # e + COMBINING ACUTE ACCENT
    "Ще\u0301 не вмерла",              # Cyrillic with a combining stress mark
    "日本語のテキスト",
    "한국어 텍스트",
    "a\u0300\u0301\u0302b",            # several marks on one base
    "Ｆｕｌｌｗｉｄｔｈ",
    "数学 ∑ x² ≤ 10",
]

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "text_widths.txt"), "w", encoding="utf-8") as f:
    for s in SAMPLES:
        f.write("%s\t%d\t%d\n" % (s, wcswidth(s), len(s)))
