#!/usr/bin/env python3
"""trip_summary: OUTDIR/summary.json of a GPU trip (tests/e2e/gpu/trip.sh) from its
logs folder, after every step; --print also prints the compact summary.

    tests/e2e/gpu/trip_summary.py LOGS SUMMARY.json [--print]

Targets (issue 40): kernels, end to end and memcheck pass; batch-1 decode of
the Llama-3-8B shape in Q4_0 >= 85 % of the copy-bandwidth roofline; batch 64
aggregate >= 10x batch 1; prefill 4096 >= 50 % of cuBLAS's f16 GEMM rate on
the same products. Standard library only (the GPU machine has no network).
"""
import json
import os
import re
import sys

LOWBIT = ("iq4_xs", "iq4_nl", "q3_k", "q2_k")


def tap(path):
    """(pass, fail, bail, diagnostics) of a TAP log, or None when absent."""
    if not os.path.exists(path):
        return None
    p = f = 0
    bail = None
    diag = []
    with open(path, errors="replace") as fh:
        for line in fh:
            if line.startswith("ok "):
                p += 1
            elif line.startswith("not ok"):
                f += 1
                diag.append(line.strip()[:200])
            elif line.startswith("Bail out!"):
                bail = line.strip()[:300]
            elif line.startswith("# ") and len(diag) < 40:
                diag.append(line.strip()[:200])
    return {"pass": p, "fail": f, "bail": bail, "notes": diag}


def main():
    logs, dest = sys.argv[1], sys.argv[2]
    steps = {}
    try:
        with open(os.path.join(logs, "steps.tsv")) as fh:
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 4:
                    name, rc, secs, limit = parts
                    steps[name] = {"rc": int(rc) if rc.lstrip("-").isdigit() else rc,
                                   "seconds": int(secs), "limit_or_reason": limit}
    except FileNotFoundError:
        pass
    s = {"steps": steps}
    for name in ("kernels", "e2e", "embed", "kvq", "kvio", "lowbit_e2e", "memcheck_kernels", "memcheck_e2e"):
        t = tap(os.path.join(logs, name + ".log"))
        if t is not None and name in steps:
            steps[name]["tap"] = t
    for name in ("memcheck_kernels", "memcheck_e2e"):
        path = os.path.join(logs, name + ".log")
        if os.path.exists(path):
            m = re.findall(r"ERROR SUMMARY: (\d+) error", open(path, errors="replace").read())
            steps[name]["memcheck_errors"] = int(m[-1]) if m else None
    bench = {}
    for fn in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        if fn.startswith("bench_") and fn.endswith(".json"):
            try:
                bench[fn[6:-5]] = json.load(open(os.path.join(logs, fn)))
            except (ValueError, OSError) as e:
                bench[fn[6:-5]] = {"ok": False, "error": "unreadable: %s" % e}
    s["bench"] = bench
    # decode from position 4096 by KV type (kv4k_TYPE.json): tok/s per batch
    kvd = {}
    for fn in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        if fn.startswith("kv4k_") and fn.endswith(".json"):
            try:
                j = json.load(open(os.path.join(logs, fn)))
                kvd[fn[5:-5]] = {str(d["batch"]): d["tok_s"] for d in j.get("decode", [])}
            except (ValueError, OSError, KeyError, TypeError) as e:
                kvd[fn[5:-5]] = {"error": "unreadable: %s" % e}
    s["kv_decode_ctx4096"] = kvd
    # the pipelined int8 matvec (TERN_CUDA_MV_PIPE=1, mv_pipe_TYPE.json) beside
    # the same type's default bench: tok/s per batch and the ratio
    mvp = {}
    for fn in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        if fn.startswith("mv_pipe_") and fn.endswith(".json"):
            t = fn[8:-5]
            try:
                j = json.load(open(os.path.join(logs, fn)))
                base = {d["batch"]: d["tok_s"] for d in bench.get(t, {}).get("decode", [])}
                mvp[t] = {str(d["batch"]): {"pipe": d["tok_s"], "default": base.get(d["batch"]),
                                            "x": round(d["tok_s"] / base[d["batch"]], 3)
                                            if base.get(d["batch"]) else None}
                          for d in j.get("decode", [])}
            except (ValueError, OSError, KeyError, TypeError, ZeroDivisionError) as e:
                mvp[t] = {"error": "unreadable: %s" % e}
    s["mv_pipe"] = mvp

    def passed(name):
        st = steps.get(name)
        if not st or st["rc"] == "skipped":
            return None
        t = st.get("tap")
        return st["rc"] == 0 and (t is None or (t["fail"] == 0 and t["bail"] is None))

    targets = {}
    targets["kernels"] = passed("kernels")
    targets["e2e"] = passed("e2e")
    targets["embed"] = passed("embed")
    targets["kvq"] = passed("kvq")
    targets["kvio"] = passed("kvio")
    targets["lowbit_e2e"] = passed("lowbit_e2e")
    mk, me = passed("memcheck_kernels"), passed("memcheck_e2e")
    targets["memcheck"] = None if mk is None and me is None else bool(mk) and me is not False
    q = bench.get("q4_0", {})
    dec = {d["batch"]: d for d in q.get("decode", [])}
    if 1 in dec:
        v = dec[1]["roofline_pct"]
        targets["decode_b1_roofline_pct"] = {"value": v, "target": 85, "met": v >= 85}
    if 1 in dec and 64 in dec:
        v = dec[64]["tok_s"] / dec[1]["tok_s"]
        targets["batch64_x_batch1"] = {"value": round(v, 2), "target": 10, "met": v >= 10}
    pre = {p["tokens"]: p for p in q.get("prefill", [])}
    if 4096 in pre:
        v = pre[4096].get("gemm_pct", 0)
        targets["prefill4096_gemm_pct"] = {"value": v, "target": 50, "met": v >= 50}
    # the low-bit formats (IQ4_XS, IQ4_NL, Q3_K, Q2_K): on the GPU since issue
    # 40's third session; each bench that ran must have decode figures (a
    # type the backend refused would have none)
    lb = {}
    for t in LOWBIT:
        st = steps.get("bench_" + t)
        if not st or st["rc"] == "skipped":
            continue
        d1 = {d.get("batch"): d for d in bench.get(t, {}).get("decode", [])}.get(1)
        lb[t] = {"ran": st["rc"] == 0 and d1 is not None,
                 "b1_tok_s": d1.get("tok_s") if d1 else None,
                 "b1_roofline_pct": d1.get("roofline_pct") if d1 else None}
    s["lowbit"] = lb
    targets["lowbit_on_gpu"] = None if not lb else all(v["ran"] for v in lb.values())
    s["targets"] = targets
    correct = [targets[k] for k in ("kernels", "e2e", "memcheck")]
    correct += [targets[k] for k in ("embed", "kvq", "kvio", "lowbit_e2e") if targets[k] is not None]
    s["ran_on_gpu"] = steps.get("kernels", {}).get("rc") not in (None, "skipped")
    s["ok"] = s["ran_on_gpu"] and all(c is True for c in correct)
    s["built"] = steps.get("build", {}).get("rc") == 0
    tmp = dest + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(s, fh, indent=1)
    os.replace(tmp, dest)

    if "--print" in sys.argv:
        print("== trip summary")
        for name, st in steps.items():
            extra = ""
            if "tap" in st:
                t = st["tap"]
                extra = " pass %d fail %d%s" % (t["pass"], t["fail"], " BAIL " + t["bail"] if t["bail"] else "")
            if st.get("memcheck_errors") is not None:
                extra += " memcheck errors %d" % st["memcheck_errors"]
            print("  %-20s rc %-8s %4ds%s" % (name, st["rc"], st["seconds"], extra))
            if "tap" in st:
                for n in st["tap"]["notes"]:
                    if n.startswith("not ok") or "CPU" in n or "agree" in n:
                        print("      " + n)
        for t, b in bench.items():
            if not b.get("decode"):
                print("  bench %s: %s" % (t, b.get("error", "no decode figures")))
                continue
            d = " ".join("b%d %.0f tok/s %.0f%% (%s nodes)" % (x["batch"], x["tok_s"], x["roofline_pct"], x.get("graph_nodes"))
                         for x in b["decode"])
            p = " ".join("pp%d %.0f tok/s %.0f%% of GEMM" % (x["tokens"], x["tok_s"], x.get("gemm_pct", 0))
                         for x in b.get("prefill", []))
            k = b.get("kernels", {})
            print("  bench %-5s copy %.0f read %.0f GB/s | %s | %s | f16 copies %.1f GiB | mv %.0f GB/s dq %.0f attn4k %.0f"
                  % (t, b.get("copy_gbps", 0), b.get("read_gbps", 0), d, p, b.get("f16_copy_bytes", 0) / 2**30,
                     k.get("matvec_gbps", 0), k.get("dequant_gbps", 0), k.get("attn4k_gbps", 0))
                  + (" (%.1f us; KV q8_0 %.1f us, q4_0 %.1f us)" % (k["attn4k_us"], k["attn4k_q8_0_us"], k["attn4k_q4_0_us"])
                     if "attn4k_q8_0_us" in k and "attn4k_us" in k and "attn4k_q4_0_us" in k else ""))
        if lb:
            print("  low-bit decode b1: " + " | ".join(
                "%s %s" % (t, "%.1f tok/s %.0f%%" % (v["b1_tok_s"], v["b1_roofline_pct"] or 0)
                           if v["ran"] else "FAILED") for t, v in lb.items()))
        if kvd:
            print("  kv decode from 4096: " + " | ".join(
                "%s %s" % (k, " ".join("b%s %.1f tok/s" % (b, v) for b, v in sorted(d.items(), key=lambda x: x[0])
                                       if not isinstance(v, str)) or d.get("error", "?"))
                for k, d in sorted(kvd.items())))
        if mvp:
            print("  mv pipelined vs default: " + " | ".join(
                "%s %s" % (t, " ".join("b%s %.1f/%s tok/s (x%s)" % (b, v["pipe"], "%.1f" % v["default"]
                                                                     if v["default"] else "?", v["x"] or "?")
                                       for b, v in sorted(d.items(), key=lambda x: int(x[0]))
                                       if isinstance(v, dict)) or d.get("error", "?"))
                for t, d in sorted(mvp.items())))
        for fn in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
            if fn.startswith(("ab_", "ablation_", "ctx")) and fn.endswith(".log"):
                for line in open(os.path.join(logs, fn), errors="replace"):
                    if "decode batch" in line or "kernels:" in line:
                        print("  %-24s %s" % (fn[:-4], " ".join(line.split())[:110]))
        for line in ncu_step(os.path.join(logs, "ncu_step.log")):
            print("  " + line)
        print("  targets: " + json.dumps(targets))
        print("  ok: %s (ran on a GPU: %s)" % (s["ok"], s["ran_on_gpu"]))
    return 0


def ncu_step(path, n=14):
    """One decode step profiled by ncu (--csv, gpu__time_duration.sum per
    kernel): the kernels grouped by name, by total time, and their sum."""
    if not os.path.exists(path):
        return []
    import csv
    head, per = None, {}
    for rec in csv.reader(l for l in open(path, errors="replace") if l.startswith('"')):
        if head is None:
            if "Kernel Name" in rec and "Metric Value" in rec:
                head = rec
            continue
        r = dict(zip(head, rec))
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            v = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        unit = r.get("Metric Unit", "ns")
        us = v / 1000 if unit in ("ns", "nsecond") else v * 1000 if unit in ("ms", "msecond") else v
        name = r["Kernel Name"].split("(")[0].replace("void ", "").strip()
        c, t = per.get(name, (0, 0.0))
        per[name] = (c + 1, t + us)
    total = sum(t for _, t in per.values())
    if not per:
        return []
    out = ["ncu step: %d kernels, %.0f us of kernel time in one batch-1 decode step" %
           (sum(c for c, _ in per.values()), total)]
    for name, (c, t) in sorted(per.items(), key=lambda kv: -kv[1][1])[:n]:
        out.append("  %5.1f%% %6.0f us %4d x %6.1f us  %s" % (100 * t / total, t, c, t / c, name[:60]))
    return out


if __name__ == "__main__":
    sys.exit(main())
