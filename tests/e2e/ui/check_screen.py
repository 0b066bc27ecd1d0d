#!/usr/bin/env python3
"""Checks a captured tmux screen (stdin) of COLS columns: every row that
ends on a border takes exactly COLS cells (no row more) by the Python
wcwidth package (an oracle independent of
the C library table the UI lays text out with), and every row between a
box's top corners has a border glyph at the columns of those corners, so
wide characters did not shift the right border. Exit 1 with a reason."""
import sys
from wcwidth import wcswidth, wcwidth

cols = int(sys.argv[1])
rows = sys.stdin.read().split("\n")
if rows and rows[-1] == "":
    rows.pop()
bad = []
cells = []
for i, r in enumerate(rows):
    w = wcswidth(r)
    # tmux leaves cells cleared to the end of a line out of the capture, so
    # only a row that ends on a border must fill the width exactly
    if w > cols or w < 0 or (r.rstrip()[-1:] in ("│", "┐", "┘") and w != cols):
        bad.append("row %d is %d cells wide, not %d: %r" % (i, w, cols, r))
    # map display column -> character
    m, c = {}, 0
    for ch in r:
        m[c] = ch
        c += max(wcwidth(ch), 0)
    cells.append(m)

# the first row holds the tops of the side-by-side boxes
tops = [c for c, ch in cells[0].items() if ch in "┌┐"] if cells else []
for c in tops:
    # follow each corner's border down until the box's bottom corner
    for i in range(1, len(cells)):
        ch = cells[i].get(c)
        if ch in ("└", "┘"):
            break
        if ch not in ("│", "┌", "┐", "├", "┤"):
            bad.append("row %d col %d: %r where the border should be" % (i, c, ch))
            break
if len(rows) == 0:
    bad.append("empty capture")
for b in bad[:5]:
    print(b)
sys.exit(1 if bad else 0)
