#!/usr/bin/env bash
# check-live.sh URL: the remote suite against any live OpenAI-compatible
# server (vLLM, SGLang, llama-server, Ollama, tern serve), e.g. on a GPU box:
#   tests/e2e/remote/check-live.sh http://gpu-box:8000/v1
# Runs the live checks (streaming chat, usage and cached tokens, cancel
# mid-stream with the server seen idle after, /metrics read through the
# engine, a bench profile) with the tern binary of TERN_BIN (default
# build/app/tern). TERN_API_KEY is sent when set. Prints TAP; exits non-zero
# when a check fails.
set -u
[ $# -ge 1 ] || { echo "usage: $0 URL" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
TERN_SRC=${TERN_SRC:-$(cd "$here/../../.." && pwd)}
T=${TERN_BIN:-$TERN_SRC/build/app/tern}
. "$TERN_SRC/tests/tap.sh"
. "$here/live_checks.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
diag "server $1, tern $T"
live_checks "$1"
# Perplexity through the server's prompt log-probabilities (echo + logprobs,
# or vLLM's prompt_logprobs), when TERN_PPL_MODEL names a GGUF file with the
# server model's tokenizer: a number, or a refusal that names the server.
if [ -n "${TERN_PPL_MODEL:-}" ]; then
  "$T" eval --perplexity "$TERN_SRC/README.md" --ctx 128 --chunks 2 -m "$TERN_PPL_MODEL" \
    --url "$1" --no-save >"$out/ppl" 2>"$out/pple"
  diag "perplexity: $(cat "$out/ppl" "$out/pple" | head -c 300)"
  ok $(grep -q '^perplexity [0-9]' "$out/ppl" || grep -q 'cannot give a prompt' "$out/pple"; echo $?) \
    "live: eval --perplexity --url gives a figure or names why the server cannot"
fi
tap_done
