#!/usr/bin/env python3
"""cu2cpp: rewrites a CUDA source for the CPU stand-in in this folder:
kernel launches k<<<grid, block[, smem[, stream]]>>>(args); become
emu_launch(grid, block, smem, [=]() { k(args); }), dynamic shared memory
becomes a pointer to the block's buffer. usage: cu2cpp.py IN.cu OUT.cpp"""
import re
import sys

LAUNCH = re.compile(r"([A-Za-z_]\w*(?:<[^;]*?>)?)<<<(.*?)>>>\((.*?)\);", re.S)


def split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def launch(m):
    name, cfg, args = m.group(1), split_top(m.group(2)), m.group(3)
    grid, block = cfg[0], cfg[1]
    smem = cfg[2] if len(cfg) > 2 else "0"
    # arguments are evaluated at the launch (a graph keeps them), as CUDA does
    return (f"{{ auto emu_args = std::make_tuple({args}); "
            f"emu_launch(dim3({grid}), dim3({block}), (size_t)({smem}), "
            f"[=]() {{ std::apply({name}, emu_args); }}); }}")


src = open(sys.argv[1]).read()
out = LAUNCH.sub(launch, src)
out = re.sub(r"extern\s+__shared__\s+(float4|float)\s+(\w+)\[\];", r"\1 *\2 = (\1 *)emu_dyn_smem;", out)
open(sys.argv[2], "w").write(f'#include <tuple>\n#line 1 "{sys.argv[1]}"\n' + out)
