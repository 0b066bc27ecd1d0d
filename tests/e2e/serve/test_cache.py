"""test_cache: the prompt cache through tern serve (issue 39). A server with
--kv-disk answers a ~1,500-token conversation, lists it at GET /v1/tern/cache
as an in-memory prefix with hashes and counts and no text, and saves it when
it stops; a new server lists the disk entry, and the same conversation (and
its next turn) loads the prefix from disk (usage's cached_tokens) and gets
the same greedy reply as the cold one. --cache-text shows the opening text.
A corrupted file, and a server with another KV type, give the cold reply with
one 'kv cache:' line on stderr. Without --kv-disk nothing is written."""
import glob
import json
import os
import tempfile

from serve_lib import Server, diag, done, ok, request

SHARED = os.environ.get("TERN_SHARED", "../shared")
with open(os.path.join(SHARED, "texts", "gpl-3.0.txt"), encoding="utf-8") as f:
    TEXT = f.read()[:6500]
MSGS = [{"role": "user", "content": "Summarise this licence text in one sentence.\n\n" + TEXT}]
DATA = tempfile.mkdtemp(prefix="tern-cache-data-")
ENV = {"XDG_DATA_HOME": DATA}
KVDIR = os.path.join(DATA, "tern", "kvcache")


def ask(base, msgs):
    body = {"model": "default", "messages": msgs, "max_tokens": 16, "temperature": 0}
    st, _, out = request(base, "POST", "/v1/chat/completions", body, timeout=600)
    if st != 200:
        diag(out[:300])
        return None, 0
    j = json.loads(out)
    cached = (j.get("usage", {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return j["choices"][0]["message"]["content"], cached


def listing(base):
    st, _, out = request(base, "GET", "/v1/tern/cache")
    return (json.loads(out) if st == 200 else None), out


def kv_lines(s):
    return [l for l in s.log().splitlines() if l.startswith("kv cache:")]


# Off by default: no files.
s = Server(env=ENV)
ok(s.ready(), "server without --kv-disk up")
cold, c0 = ask(s.base, MSGS)
st, _, out = request(s.base, "POST", "/v1/tern/cache/save", b"{}")
ok(st == 409 and b"no disk prompt cache" in out, f"save without --kv-disk: {st}")
ok(cold is not None and c0 == 0, f"cold reply: {cold!r}")
j, _ = listing(s.base)
ok(j is not None and any(e["where"] == "memory" and e["tokens"] >= 1000 for e in j["data"]),
   "GET /v1/tern/cache lists the in-memory prefix without --kv-disk")
s.stop()
ok(not glob.glob(os.path.join(KVDIR, "*.tkv")), "without --kv-disk nothing is written")

# The first server with the disk cache: prefills, lists, saves at exit.
s = Server(["--kv-disk", "1G"], env=ENV)
ok(s.ready(), "server with --kv-disk 1G up")
r, c = ask(s.base, MSGS)
ok(r == cold and c == 0, "first session: the cold reply")
j, raw = listing(s.base)
mem = [e for e in (j or {}).get("data", []) if e["where"] == "memory"]
ok(len(mem) == 1 and mem[0]["tokens"] >= 1000 and len(mem[0]["hash"]) == 16 and
   mem[0]["bytes"] > 0 and mem[0]["made_by"] and "text" not in mem[0] and
   j["text_shown"] is False, f"listed: {mem}")
ok(b"GNU" not in raw and b"licen" not in raw.lower(), "no prompt text in the listing by default")
st, _, out = request(s.base, "POST", "/v1/tern/cache/save", b"{}")
ok(st == 200 and json.loads(out)["saved"] == 1 and len(glob.glob(os.path.join(KVDIR, "*.tkv"))) == 1,
   f"POST /v1/tern/cache/save writes it while serving: {st} {out[:80]!r}")
s.stop()
files = glob.glob(os.path.join(KVDIR, "*.tkv"))
ok(len(files) == 1, f"saved at exit: {[os.path.basename(f) for f in files]}")
size = os.path.getsize(files[0]) if files else 0
diag(f"entry: {size} bytes")

# A new server restores it.
s = Server(["--kv-disk", "1G"], env=ENV)
j, _ = listing(s.base)
disk = [e for e in (j or {}).get("data", []) if e["where"] == "disk"]
ok(len(disk) == 1 and disk[0]["usable"] and disk[0]["bytes"] == size and disk[0]["hits"] == 0 and
   j["disk_bytes"] == size, f"disk entry listed: {disk}")
r, c = ask(s.base, MSGS)
ok(r == cold and c >= 1000, f"restored: the same reply, {c} prompt tokens from disk")
j, _ = listing(s.base)
disk = [e for e in j["data"] if e["where"] == "disk"]
ok(disk and disk[0]["hits"] == 1, "the disk entry's hit counted")
turn2 = MSGS + [{"role": "assistant", "content": cold}, {"role": "user", "content": "Shorter?"}]
r2, c2 = ask(s.base, turn2)
s.stop()

s = Server(["--kv-disk", "1G", "--cache-text"], env=ENV)
j, _ = listing(s.base)
texts = [e.get("text", "") for e in (j or {}).get("data", [])]
ok(j and j["text_shown"] and texts and all(t.startswith("<|im_start|>system") for t in texts),
   f"--cache-text: the opening text shown: {texts[:1]}")
r3, c3 = ask(s.base, turn2)
ok(r3 == r2 and c3 >= 1000, f"next turn after a restart: same reply, {c3} tokens from disk")
s.stop()

# Another KV type: ignored with one line, the cold reply.
s = Server(["--kv-disk", "1G", "--kv-type", "q8_0"], env=ENV)
q8, cq = ask(s.base, MSGS)
lines = kv_lines(s)
ok(cq == 0 and len(lines) == 1 and "another KV type" in lines[0], f"q8_0 server: {lines}")
s.stop()
for f in glob.glob(os.path.join(KVDIR, "*.tkv")):  # only the f16 entries stay
    with open(f, "rb") as fh:
        fh.seek(40)
        if fh.read(4) != b"\0\0\0\0":
            os.unlink(f)

# Corruption: a flipped byte in each entry's KV.
for f in glob.glob(os.path.join(KVDIR, "*.tkv")):
    with open(f, "r+b") as fh:
        fh.seek(-777, os.SEEK_END)
        b = fh.read(1)
        fh.seek(-777, os.SEEK_END)
        fh.write(bytes([b[0] ^ 0x10]))
s = Server(["--kv-disk", "1G"], env=ENV)
r, c = ask(s.base, MSGS)
lines = kv_lines(s)
ok(r == cold and c == 0 and len(lines) == 1 and "checksum mismatch" in lines[0],
   f"corrupt entry: the cold reply, one line: {lines}")
s.stop()
done()
