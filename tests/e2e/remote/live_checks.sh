#!/usr/bin/env bash
# live_checks URL: the remote engine against a live OpenAI-compatible server
# (sourced by test_llama_server.sh and check-live.sh; TAP helpers loaded).
# Streaming chat, usage counts, a second identical turn that reports cached
# prompt tokens (where the server reports them), cancel mid-stream (Ctrl-C
# closes the connection; the server's /slots or /metrics must then show it
# idle), the server's /metrics read through the engine, and a short
# `tern bench --profile` through the URL. Needs: $T (tern), $out (scratch).
live_checks() {
  local U=$1 prompt="Write one sentence about the sea."
  timeout 120 "$T" run --url "$U" --no-history --temp 0 -n 24 -p "$prompt" -v \
    >"$out/l1" 2>"$out/l1e"
  local rc=$?
  ok $rc "live: streaming chat through --url ($U)"
  ok $([ -s "$out/l1" ]; echo $?) "live: a non-empty reply"
  local gen pr cached
  gen=$(sed -n 's/^eval count: *\([0-9]*\) token.*/\1/p' "$out/l1e")
  pr=$(sed -n 's/^prompt eval count: *\([0-9]*\) token.*/\1/p' "$out/l1e")
  diag "reply: $(head -c 200 "$out/l1" | tr '\n' ' ')" "usage: prompt $pr, generated $gen"
  ok $([ "${gen:-0}" -gt 0 ] && [ "${pr:-0}" -gt 0 ]; echo $?) "live: usage counts prompt and generated tokens"
  ok $(grep -q 'counted from stream events' "$out/l1e"; [ $? -ne 0 ]; echo $?) "live: counts from the server's usage, not estimated"

  timeout 120 "$T" run --url "$U" --no-history --temp 0 -n 24 -p "$prompt" -v \
    >"$out/l2" 2>"$out/l2e"
  cached=$(sed -n 's/^prompt eval count: .*(\([0-9]*\) reused.*/\1/p' "$out/l2e")
  diag "second identical turn: $cached cached prompt tokens"
  ok $([ "${cached:-0}" -gt 0 ]; echo $?) "live: the second identical turn reports cached prompt tokens"
  ok $(cmp -s "$out/l1" "$out/l2"; echo $?) "live: greedy replies repeat exactly"
  grep -A1 '^server metrics:' "$out/l2e" | sed 's/^/# /'
  ok $(grep -q '^server metrics: *[a-z]' "$out/l2e"; echo $?) "live: the server's /metrics read (source named)"

  # Cancel mid-stream: a long reply, Ctrl-C after the first bytes.
  timeout 120 "$T" run --url "$U" --no-history --temp 0 -n 4000 --ignore-eos \
    -p "Count from one to one thousand in words." >"$out/c" 2>"$out/ce" &
  local pid=$! i
  for i in $(seq 200); do [ -s "$out/c" ] && break; sleep 0.1; done
  ok $([ -s "$out/c" ]; echo $?) "cancel: tokens streamed before the cancel"
  kill -INT $pid
  wait $pid
  local crc=$?
  ok $([ $crc -eq 130 ]; echo $?) "cancel: Ctrl-C cancels the request (exit 130, got $crc)"
  local idle=1 root=${U%/v1}
  for i in $(seq 30); do
    if curl -sf "$root/slots" >"$out/slots" 2>/dev/null; then
      python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(any(x.get("is_processing") for x in s))' "$out/slots" && { idle=0; break; }
    elif curl -sf "$root/metrics" >"$out/m" 2>/dev/null; then
      awk '/^(llamacpp:requests_processing|vllm:num_requests_running|sglang:num_running_reqs)/ {s+=$2} END {exit s > 0}' "$out/m" && { idle=0; break; }
    fi
    sleep 0.1
  done
  ok $idle "cancel: the server shows no request processing within 3 s"

  timeout 300 "$T" bench --profile short --requests 4 --url "$U" >"$out/b" 2>"$out/be"
  ok $? "bench --profile short through --url"
  tail -5 "$out/b" | sed 's/^/# /'
}
