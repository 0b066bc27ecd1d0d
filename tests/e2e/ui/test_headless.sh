#!/bin/bash
# test_headless: runs the real `tern chat` loop off-screen (--headless-frames,
# the mode sanitizer builds use): a missing model and an unusable history
# database each show a readable message and the UI stays up; a message that
# can never fit the context is refused with the numbers, a reply limit past
# the context is shortened to what remains;
# a normal reply streams with at most ~30 frames a second.
set -u
. "$TERN_SRC/tests/tap.sh"

. "$TERN_SRC/tests/e2e/model_env.sh"
touch "$TMP/afile"
run() { "$TERN_BIN" chat --size 80x24 "$@" 2>"$TMP/err"; }
show() { sed 's/^/  |/' "$TMP/out" | while IFS= read -r l; do diag "$l"; done; }

run -m "$TMP/missing.gguf" --db "$TMP/afile/h.db" --headless-frames 200 --keys '{wait}hi\r{wait}' >"$TMP/out"
ok $? "no model and no database: exits 0"
flat=$(tr -d '\n ' <"$TMP/out")
grep -q 'modelloadfailed:' <<<"$flat" && grep -q 'missing.gguf' <<<"$flat"
ok $? "model load failure is shown with the file name"
grep -q 'historyoff' <<<"$flat" && grep -q 'Notadirectory' <<<"$flat"
ok $? "history database failure is shown with the reason"
grep -q 'nomodelloaded' <<<"$flat"; ok $? "a message sent without a model gets a readable answer"
show

long=$(printf 'word %.0s' $(seq 60))
run -m "$MODEL" --db "$TMP/ctx.db" --ctx 64 --headless-frames 400 --keys "{wait}$long\\r{wait}" >"$TMP/out"
ok $? "tiny context: exits 0"
flat=$(tr -d '\n │' <"$TMP/out")
grep -Eq 'context full: the newest message alone is [0-9]+ tokens' "$TMP/out" && grep -q 'contextholds64' <<<"$flat"
ok $? "a message that alone cannot fit the context is refused with the numbers"
show
run -m "$MODEL" --db "$TMP/ctx2.db" --ctx 64 --max-tokens 500 --headless-frames 3000 --keys '{wait}hello there\r{wait}' >"$TMP/out"
flat=$(tr -d '\n │' <"$TMP/out")
grep -Eq 'assistant·[0-9]+tok' <<<"$flat" && ! grep -q 'rejected' <<<"$flat"
ok $? "a reply limit larger than the context is shortened, not rejected"
show

run -m "$MODEL" --db "$TMP/reply.db" --max-tokens 24 --headless-frames 3000 --keys '{wait}Say hi.\r{wait}' >"$TMP/out"
ok $? "reply run exits 0"
grep -Eq 'assistant · [0-9]+ tok' "$TMP/out"; ok $? "reply finished on screen"
read -r frames secs < <(sed -n 's/^headless: \([0-9]*\) frames in \([0-9.]*\) s$/\1 \2/p' "$TMP/err")
awk -v f="${frames:-0}" -v s="${secs:-0}" 'BEGIN { exit !(f > 2 && s > 0 && f / s <= 31) }'
ok $? "frame rate capped at ~30/s (${frames:-?} frames in ${secs:-?} s)"
show
tap_done
