#!/bin/bash
# test_active: what tern says a token reads (active) against what the file
# holds (every expert resident), for mixture-of-experts and dense
# conformance models: `tern info --json` (memory) and `tern bench --json`
# (the engine's model) against the sums the gguf package computes from the
# file's own tensor table: resident = every tensor's bytes; read per token
# = that minus the unused experts' share of each expert stack minus, for an
# untied embedding table, all but one of its rows.
. "$(dirname "$0")/../../tap.sh"
SRC=${TERN_SRC:?} BIN=${TERN_BIN:?}
DIR=${TERN_CONFORMANCE_DIR:-$HOME/.cache/tern/conformance}
NAMES="qwen3moe-q4_k mixtral-q4_k qwen3-q4_k llama-tied-l3rope-q8_0"
# shellcheck disable=SC2086
python3 "$SRC/tests/e2e/conformance/gen_models.py" --out "$DIR" $NAMES >/dev/null 2>&1
ok $? "gen_models.py writes the models"
for name in $NAMES; do
    f="$DIR/$name.gguf"
    want=$(python3 - "$f" <<'PY'
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
def u32(k):
    f = r.fields.get(f"{arch}.{k}")
    return int(f.parts[-1][0]) if f else 0
ne, nu = u32("expert_count"), u32("expert_used_count")
total = sum(int(t.n_bytes) for t in r.tensors)
params = sum(int(t.n_elements) for t in r.tensors)
act, act_p = total, params
names = {t.name for t in r.tensors}
for t in r.tensors:
    if "_exps" in t.name and ne:
        act -= int(t.n_bytes) // ne * (ne - nu)
        act_p -= int(t.n_elements) // ne * (ne - nu)
    if t.name == "token_embd.weight" and "output.weight" in names:
        rows = int(t.shape[1])
        act -= int(t.n_bytes) - int(t.n_bytes) // rows
print(total, act, params, act_p)
PY
)
    read -r total act params act_p <<<"$want"
    got=$("$BIN" info --json -m "$f" | python3 -c 'import json,sys; m=json.load(sys.stdin)["memory"]; print(m["weight_bytes"], m["active_weight_bytes"], m["params"], m["active_params"])')
    [ "$got" = "$total $act $params $act_p" ]
    ok $? "$name: tern info resident $total, read per token $act bytes ($params / $act_p params); got $got"
    got=$("$BIN" bench --json -m "$f" --pp 8 --tg 2 -r 1 -t 1 2>/dev/null | python3 -c 'import json,sys; m=json.loads(sys.stdin.read()); print(m["weight_bytes"], m["active_weight_bytes"], m["params"], m["active_params"])')
    [ "$got" = "$total $act $params $act_p" ]
    ok $? "$name: the engine's model says the same (tern bench --json: $got)"
    if [ "$name" = qwen3moe-q4_k ]; then
        [ "$act" -lt "$total" ] && "$BIN" info -m "$f" | grep -q "every expert stays resident"
        ok $? "$name: tern info says every expert stays resident and decode reads less"
    fi
done
tap_done
