#!/bin/bash
# test_pull: `tern pull` against a server on 127.0.0.1 (Python's http.server
# with HTTP Range support, which the plain one lacks): a streamed download
# into the models directory, a SHA-256 checked (--sha256, and the
# X-Linked-Etag header Hugging Face sends), a partial file resumed with a
# Range request, a wrong hash refused, a file that is not GGUF refused, the
# hf: form mapped to its URL, and a clear error when nothing answers (no
# empty .part left behind; a real partial one kept and said so).
set -u
. "$TERN_SRC/tests/tap.sh"
TMP=$(mktemp -d)
export XDG_DATA_HOME="$TMP/data" XDG_CONFIG_HOME="$TMP/config"
mkdir -p "$TMP/www"
python3 - "$TMP/www/tiny.gguf" "$TMP/www/notgguf.gguf" <<'PY'
import os, sys
open(sys.argv[1], "wb").write(b"GGUF" + os.urandom(3 * 1024 * 1024))
open(sys.argv[2], "wb").write(b"<html>not a model</html>" * 100)
PY
sha=$(sha256sum "$TMP/www/tiny.gguf" | cut -d' ' -f1)
cat >"$TMP/server.py" <<'PY'
import http.server, os, sys, re
root, log = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        p = os.path.join(root, os.path.basename(self.path))
        if not os.path.exists(p):
            self.send_error(404); return
        data = open(p, "rb").read()
        rng = self.headers.get("Range")
        open(log, "a").write(f"{self.path} {rng}\n")
        start = 0
        m = re.match(r"bytes=(\d+)-", rng or "")
        if m:
            start = int(m.group(1))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data)-1}/{len(data)}")
        else:
            self.send_response(200)
        if "etag" in self.path:
            import hashlib
            self.send_header("X-Linked-Etag", '"' + hashlib.sha256(data).hexdigest() + '"')
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
coproc SRV { exec python3 "$TMP/server.py" "$TMP/www" "$TMP/log" 2>/dev/null; }
read -r -u "${SRV[0]}" port
trap 'kill $SRV_PID 2>/dev/null; rm -rf "$TMP"' EXIT
base="http://127.0.0.1:$port"
D="$XDG_DATA_HOME/tern/models"

out=$("$TERN_BIN" pull --sha256 "$sha" "$base/tiny.gguf" 2>"$TMP/e")
ok $? "pull downloads into the models directory ($out)"
cmp -s "$D/tiny.gguf" "$TMP/www/tiny.gguf" && [ ! -e "$D/tiny.gguf.part" ]; ok $? "the file is complete, no .part left"
grep -q "SHA-256 $sha verified" "$TMP/e"; ok $? "its SHA-256 verified"
rm "$D/tiny.gguf"
cp "$TMP/www/tiny.gguf" "$TMP/www/tiny-etag.gguf"
"$TERN_BIN" pull "$base/tiny-etag.gguf" >/dev/null 2>"$TMP/e"
[ $? -eq 0 ] && grep -q 'verified' "$TMP/e"; ok $? "the X-Linked-Etag hash is checked when no --sha256 is given"
head -c 1000000 "$TMP/www/tiny.gguf" >"$D/tiny.gguf.part"
: >"$TMP/log"
"$TERN_BIN" pull --sha256 "$sha" "$base/tiny.gguf" >/dev/null 2>"$TMP/e"
[ $? -eq 0 ] && grep -q 'bytes=1000000-' "$TMP/log" && cmp -s "$D/tiny.gguf" "$TMP/www/tiny.gguf"
ok $? "a partial file is resumed with a Range request ($(tr '\n' ' ' <"$TMP/log"))"
rm "$D/tiny.gguf"
"$TERN_BIN" pull --sha256 "$(printf '0%.0s' $(seq 64))" "$base/tiny.gguf" >/dev/null 2>"$TMP/e"
[ $? -eq 1 ] && grep -q 'SHA-256 mismatch' "$TMP/e" && [ ! -e "$D/tiny.gguf" ]; ok $? "a wrong SHA-256 is refused"
"$TERN_BIN" pull "$base/notgguf.gguf" >/dev/null 2>"$TMP/e"
[ $? -eq 1 ] && grep -q 'is not a GGUF file' "$TMP/e" && [ ! -e "$D/notgguf.gguf" ]; ok $? "a file that is not GGUF is refused"
"$TERN_BIN" pull "$base/missing.gguf" >/dev/null 2>"$TMP/e"
[ $? -eq 1 ] && grep -q '404' "$TMP/e" && [ ! -e "$D/missing.gguf.part" ]
ok $? "a missing file: the HTTP error, no empty .part left ($(tail -1 "$TMP/e" | head -c 120))"
"$TERN_BIN" pull http://127.0.0.1:1/x.gguf >/dev/null 2>"$TMP/e"
[ $? -eq 1 ] && grep -q 'no network, or the host is down? nothing was downloaded' "$TMP/e" &&
    ! grep -q 'kept' "$TMP/e" && [ ! -e "$D/x.gguf.part" ]
ok $? "nothing listening: a clear error, no 0-byte .part left, none said to be kept ($(tail -1 "$TMP/e" | head -c 160))"
printf 'GGUF1234' >"$D/x.gguf.part"
"$TERN_BIN" pull http://127.0.0.1:1/x.gguf >/dev/null 2>"$TMP/e"
[ $? -eq 1 ] && grep -q "8 bytes kept in $D/x.gguf.part: run the same command again to resume" "$TMP/e" &&
    [ -s "$D/x.gguf.part" ]
ok $? "a real partial file is kept and said so ($(tail -1 "$TMP/e" | head -c 200))"
rm -f "$D/x.gguf.part"
"$TERN_BIN" pull --dry-run hf:unsloth/gemma-3-270m-it-GGUF/gemma-3-270m-it-Q4_K_M.gguf >"$TMP/o"
grep -q '^https://huggingface.co/unsloth/gemma-3-270m-it-GGUF/resolve/main/gemma-3-270m-it-Q4_K_M.gguf -> .*/tern/models/gemma-3-270m-it-Q4_K_M.gguf$' "$TMP/o"
ok $? "hf:ORG/REPO/FILE.gguf maps to its resolve URL"
"$TERN_BIN" models | grep -q '^tiny-etag '; ok $? "the pulled file is listed by tern models (unreadable as a model, named)"
tap_done
