#!/usr/bin/env bash
# The GPU trip's parts that need no GPU: both scripts pass shellcheck; the
# summary reads recorded logs (a GPU run and a run without one) into valid
# JSON with the issue's targets; a trip whose deadline is already spent skips
# every step, builds nothing and still writes its summary.
. "$TERN_SRC/tests/tap.sh"
src=${TERN_SRC:?}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

check "shellcheck trip.sh and prepare.sh" shellcheck "$src/tests/e2e/gpu/trip.sh" "$src/tests/e2e/gpu/prepare.sh"

# a recorded GPU run: every correctness step passed, Q4_0 figures
logs=$tmp/gpu; mkdir -p "$logs"
printf 'env\t0\t1\t30\nbuild\t0\t28\t300\nkernels\t0\t1\t120\ne2e\t0\t6\t150\nkvq\t0\t20\t90\nkvio\t0\t9\t60\nlowbit_e2e\t0\t15\t60\nbench_q4_0\t0\t9\t120\nkv4k_f16\t0\t12\t45\nkv4k_q8_0\t0\t12\t45\nbench_iq4_xs\t0\t8\t60\nbench_q2_k\t0\t8\t60\nmemcheck_kernels\t0\t2\t120\nmemcheck_e2e\t0\t2\t120\n' > "$logs/steps.tsv"
printf 'ok 1 - a\nok 2 - b\n1..2\n' > "$logs/kernels.log"
printf '# CPU vs CUDA: top-1 579/586\nok 1 - a\n1..1\n' > "$logs/e2e.log"
printf 'ok 1 - 1 layer, KV q8_0\nok 2 - 1 layer, KV q4_0\n1..2\n' > "$logs/kvq.log"
printf 'ok 1 - KV f16: bit-identical logits\nok 2 - resume, KV f16: 192 of 200 restored\n1..2\n' > "$logs/kvio.log"
printf 'ok 1 - IQ4_XS: the CUDA backend takes the model\nok 2 - IQ4_XS, 2 layers\n1..2\n' > "$logs/lowbit_e2e.log"
# decode from position 4096 by KV type (bench_cuda BENCH_KV, the trip's kv4k_* steps)
echo '{"model": "llama3-8b", "type": "Q4_0", "kv_type": "f16", "decode": [{"batch": 1, "tok_s": 212.0}, {"batch": 8, "tok_s": 509.0}]}' > "$logs/kv4k_f16.json"
echo '{"model": "llama3-8b", "type": "Q4_0", "kv_type": "q8_0", "decode": [{"batch": 1, "tok_s": 231.5}, {"batch": 8, "tok_s": 640.2}]}' > "$logs/kv4k_q8_0.json"
# the pipelined int8 matvec's bench (ab_mv_pipe_q4_0 writes mv_pipe_q4_0.json)
echo '{"model": "llama3-8b", "type": "Q4_0", "decode": [{"batch": 1, "tok_s": 247.6}, {"batch": 64, "tok_s": 5260.0}]}' > "$logs/mv_pipe_q4_0.json"
printf 'ok 1 - a\n1..1\n========= ERROR SUMMARY: 0 errors\n' > "$logs/memcheck_kernels.log"
printf 'ok 1 - a\n1..1\n========= ERROR SUMMARY: 0 errors\n' > "$logs/memcheck_e2e.log"
cat > "$logs/bench_q4_0.json" <<'J'
{"model": "llama3-8b", "type": "Q4_0", "copy_gbps": 4250.0, "read_gbps": 4016.0,
 "decode": [{"batch": 1, "tok_s": 206.3, "roofline_pct": 20.5, "graph_nodes": 290},
            {"batch": 64, "tok_s": 5260.0, "roofline_pct": 9.2, "graph_nodes": 738}],
 "f16_copy_bytes": 15032385536,
 "prefill": [{"tokens": 512, "tok_s": 16355, "gemm_pct": 32.9}, {"tokens": 4096, "tok_s": 6306, "gemm_pct": 11.3}],
 "kernels": {"matvec_gbps": 1284.0, "attn4k_us": 68.0, "attn4k_gbps": 278.0, "attn4k_q8_0_us": 41.5, "attn4k_q4_0_us": 30.2}, "ok": true}
J
# the low-bit formats: IQ4_XS with figures, Q2_K's bench ran and said nothing (refused)
echo '{"model": "llama3-8b", "type": "IQ4_XS", "decode": [{"batch": 1, "tok_s": 251.5, "roofline_pct": 30.1}]}' > "$logs/bench_iq4_xs.json"
# one decode step profiled kernel by kernel (ncu --csv; units as ncu prints them)
cat > "$logs/ncu_step.log" <<'C'
  decode batch  1:    262.4 tok/s
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","bench_cuda","h","void k_embed<2>(cu_tensor, const int *, float, float *)","1","13","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","2,304"
"1","1","bench_cuda","h","void k_matvec_q8<2, 1, 2>(mv_args, const signed char *, const float2 *, int)","1","13","(256, 1, 1)","(384, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","11.5"
"2","1","bench_cuda","h","void k_matvec_q8<2, 1, 2>(mv_args, const signed char *, const float2 *, int)","1","13","(256, 1, 1)","(256, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","7.5"
C
python3 "$src/tests/e2e/gpu/trip_summary.py" "$logs" "$tmp/gpu.json" --print > "$tmp/gpu.txt" 2>&1
ok $? "summary of a GPU run"
grep -q "ncu step: 3 kernels, 21 us" "$tmp/gpu.txt" && grep -q "2 x    9.5 us  k_matvec_q8<2, 1, 2>" "$tmp/gpu.txt"
ok $? "the profiled step's kernels are grouped by name with their times"
check "it is JSON with the targets" python3 -c '
import json, sys
s = json.load(open(sys.argv[1])); t = s["targets"]
assert s["ok"] is True and s["ran_on_gpu"] is True and s["built"] is True
assert t["kernels"] is True and t["e2e"] is True and t["memcheck"] is True and t["kvq"] is True
assert t["kvio"] is True and s["steps"]["kvio"]["tap"]["pass"] == 2
assert t["lowbit_e2e"] is True
assert s["kv_decode_ctx4096"] == {"f16": {"1": 212.0, "8": 509.0}, "q8_0": {"1": 231.5, "8": 640.2}}
assert t["decode_b1_roofline_pct"] == {"value": 20.5, "target": 85, "met": False}
assert t["batch64_x_batch1"]["met"] is True and abs(t["batch64_x_batch1"]["value"] - 25.5) < 0.01
assert t["prefill4096_gemm_pct"]["met"] is False
assert s["steps"]["memcheck_kernels"]["memcheck_errors"] == 0
assert s["lowbit"]["iq4_xs"] == {"ran": True, "b1_tok_s": 251.5, "b1_roofline_pct": 30.1}
assert s["lowbit"]["q2_k"]["ran"] is False and t["lowbit_on_gpu"] is False and "q3_k" not in s["lowbit"]
assert s["mv_pipe"] == {"q4_0": {"1": {"pipe": 247.6, "default": 206.3, "x": 1.2},
                                 "64": {"pipe": 5260.0, "default": 5260.0, "x": 1.0}}}, s["mv_pipe"]' "$tmp/gpu.json"
grep -q "mv pipelined vs default: q4_0 b1 247.6/206.3 tok/s (x1.2) b64 5260.0/5260.0 tok/s (x1.0)" "$tmp/gpu.txt"
ok $? "the printed summary has the pipelined matvec's decode beside the default's"
grep -q "bench q4_0" "$tmp/gpu.txt"; ok $? "the printed summary has the bench line"
grep -q "low-bit decode b1: iq4_xs 251.5 tok/s 30% | q2_k FAILED" "$tmp/gpu.txt"
ok $? "and the low-bit formats' batch-1 decode, a bench without figures as FAILED"
grep -q "attn4k 278 (68.0 us; KV q8_0 41.5 us, q4_0 30.2 us)" "$tmp/gpu.txt"
ok $? "and the decode attention kernel's time at 4k per KV type"
grep -q "kv decode from 4096: f16 b1 212.0 tok/s b8 509.0 tok/s | q8_0 b1 231.5 tok/s b8 640.2 tok/s" "$tmp/gpu.txt"
ok $? "the printed summary has decode tok/s with the KV cache in q8_0 beside f16"

# a failed quantized-KV comparison makes the trip not ok
cp "$logs/kvq.log" "$tmp/kvq.ok"
printf 'ok 1 - a\nnot ok 2 - b\n1..2\n' > "$logs/kvq.log"
python3 "$src/tests/e2e/gpu/trip_summary.py" "$logs" "$tmp/gpu3.json" > /dev/null 2>&1
check "a failing quantized-KV test fails the trip" python3 -c '
import json, sys; s = json.load(open(sys.argv[1])); assert s["ok"] is False and s["targets"]["kvq"] is False' "$tmp/gpu3.json"
cp "$tmp/kvq.ok" "$logs/kvq.log"

# so does a failed disk-cache resume (kv_block_io)
cp "$logs/kvio.log" "$tmp/kvio.ok"
printf 'ok 1 - a\nnot ok 2 - resume\n1..2\n' > "$logs/kvio.log"
python3 "$src/tests/e2e/gpu/trip_summary.py" "$logs" "$tmp/gpu5.json" > /dev/null 2>&1
check "a failing disk-cache resume fails the trip" python3 -c '
import json, sys; s = json.load(open(sys.argv[1])); assert s["ok"] is False and s["targets"]["kvio"] is False' "$tmp/gpu5.json"
cp "$tmp/kvio.ok" "$logs/kvio.log"

# so does a failed low-bit comparison through the backend
cp "$logs/lowbit_e2e.log" "$tmp/lowbit.ok"
printf 'ok 1 - a\nnot ok 2 - b\n1..2\n' > "$logs/lowbit_e2e.log"
python3 "$src/tests/e2e/gpu/trip_summary.py" "$logs" "$tmp/gpu4.json" > /dev/null 2>&1
check "a failing low-bit comparison fails the trip" python3 -c '
import json, sys; s = json.load(open(sys.argv[1])); assert s["ok"] is False and s["targets"]["lowbit_e2e"] is False' "$tmp/gpu4.json"
cp "$tmp/lowbit.ok" "$logs/lowbit_e2e.log"

# a failed kernel test makes the trip not ok
printf 'ok 1 - a\nnot ok 2 - b\n1..2\n' > "$logs/kernels.log"
python3 "$src/tests/e2e/gpu/trip_summary.py" "$logs" "$tmp/gpu2.json" > /dev/null 2>&1
check "a failing kernel test fails the trip" python3 -c '
import json, sys; s = json.load(open(sys.argv[1])); assert s["ok"] is False and s["targets"]["kernels"] is False' "$tmp/gpu2.json"

# the whole script, its deadline already spent: nothing runs, nothing builds
TRIP_DEADLINE=1 TRIP_BUILD="$tmp/b" TRIP_DIR="$tmp/none" bash "$src/tests/e2e/gpu/trip.sh" "$tmp/out" > "$tmp/trip.txt" 2>&1
ok $? "trip.sh with its deadline spent exits 0 (the summary says what ran)"
[ ! -e "$tmp/b/build.ninja" ]; ok $? "no build was started"
check "its summary: every step skipped, valid JSON" python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["ok"] is False and s["ran_on_gpu"] is False and s["built"] is False
assert all(v["rc"] == "skipped" for v in s["steps"].values()), s["steps"]' "$tmp/out/summary.json"
[ -s "$tmp/out/logs.tgz" ]; ok $? "the logs travel as one archive"
tap_done
