#!/bin/bash
# test_history: 'tern history' on a database written through the store API
# (store_fill). Exports are checked against the database itself read with
# Python's sqlite3 (the round trip DB -> JSON keeps every value), stats
# against numpy's percentiles, and pipes get no colour.
# usage: test_history.sh STORE_FILL   (TERN_BIN, TERN_SRC from test_env)
. "$TERN_SRC/tests/tap.sh"
fill=$1
tern=$TERN_BIN
dir=$(mktemp -d /tmp/tern-history-XXXXXX)
trap 'rm -rf "$dir"' EXIT
db=$dir/h.db

read -r sa sb < <("$fill" "$db")
ok $? "store_fill wrote a history (sessions $sa $sb)"

out=$("$tern" history --db "$db" list --json)
ok $? "list --json"
python3 - "$out" <<'EOF'
import json, sys
l = json.loads(sys.argv[1])
assert [s["messages"] for s in l] == [2, 5], l
assert l[1]["title"] == "Quokka facts" and l[0]["title"] == "多语言 тест", l
EOF
ok $? "list: two sessions, newest first, message counts"

out=$("$tern" history --db "$db" list)
case $out in *$'\033'*) r=1 ;; *"Quokka facts"*) r=0 ;; *) r=1 ;; esac
ok $r "list to a pipe: a table without colour codes"

out=$("$tern" history --db "$db" show "$sa" --timings)
case $out in *"TTFT 32.5 ms"*"prompt 44 tokens (24 cached)"*) r=0 ;; *) r=1 ;; esac
ok $r "show --timings prints each reply's phases"
out=$("$tern" history --db "$db" show "$sb")
case $out in *"assistant (cancelled)"*"Квокка — небольшое сумчатое"*) r=0 ;; *) r=1 ;; esac
ok $r "show marks a cancelled reply, keeps UTF-8 text"

"$tern" history --db "$db" export "$sa" --json > "$dir/a.json"
ok $? "export ID --json"
python3 - "$db" "$dir/a.json" "$sa" <<'EOF'
import json, sqlite3, sys
db, path, sid = sys.argv[1], sys.argv[2], int(sys.argv[3])
e = json.load(open(path))
c = sqlite3.connect(db)
s = c.execute("select id,title,model,params,created_at,updated_at from sessions where id=?", (sid,)).fetchone()
assert (e["id"], e["title"], e["model"], e["created"], e["updated"]) == (s[0], s[1], s[2], s[4], s[5]), (e, s)
assert e["params"] == json.loads(s[3])
rows = c.execute("select id,role,text,status,n_tokens,created_at,updated_at from messages where session_id=? order by id", (sid,)).fetchall()
assert len(rows) == len(e["messages"]) == 5
cols = ["queue_s","prefill_s","ttft_s","tpot_s","decode_s","e2e_s","prompt_tokens","cached_tokens","generated_tokens","model","model_file","model_hash","backend","status"]
for m, r in zip(e["messages"], rows):
    assert (m["id"], m["role"], m["text"], m["status"], m["n_tokens"], m["created"], m["updated"]) == r, (m, r)
    q = c.execute("select " + ",".join(cols) + ",params from requests where message_id=?", (r[0],)).fetchone()
    if q is None:
        assert m["request"] is None
    else:
        assert [m["request"][k] for k in cols] == list(q[:-1]), (m["request"], q)
        assert m["request"]["params"] == json.loads(q[-1])
EOF
ok $? "export --json holds exactly what the database holds (checked with Python sqlite3)"

"$tern" history --db "$db" export --all --json > "$dir/all.json"
python3 -c "
import json,sys; a=json.load(open('$dir/all.json')); one=json.load(open('$dir/a.json'))
assert len(a)==2 and a[0]==one, a"
ok $? "export --all --json: every session, oldest first, same objects"
out=$("$tern" history --db "$db" export "$sa" --markdown)
case $out in "# Quokka facts"*"## user"*"Where do quokkas live?"*"## assistant"*) r=0 ;; *) r=1 ;; esac
ok $r "export --markdown"

out=$("$tern" history --db "$db" search quokkas)
case $out in *"**Quokkas**"*) r=0 ;; *) r=1 ;; esac
case $out in *$'\033'*) r=1 ;; esac
ok $r "search: FTS5 match highlighted as **bold** in a pipe"
out=$("$tern" history --db "$db" search --json "квокка")
python3 -c "
import json,sys; h=json.loads(sys.argv[1])
assert len(h)==2 and all(x['session']==$sb and '**квокка**' in x['snippet'].lower() for x in h), h" "$out"
ok $? "search --json finds Cyrillic text in any case, snippets highlighted"
out=$("$tern" history --db "$db" search "what's")
ok $? "search text that is not FTS5 syntax still runs"

out=$("$tern" history --db "$db" stats --json)
ok $? "stats --json"
python3 - "$db" "$out" <<'EOF'
import json, sqlite3, sys
import numpy as np
c = sqlite3.connect(sys.argv[1]); st = json.loads(sys.argv[2])
assert set(st) == {"SmolLM2-135M", "gemma-3-270m"}, st
for model, s in st.items():
    n = c.execute("select count(*) from requests where model=?", (model,)).fetchone()[0]
    assert s["requests"] == n
    for k, col in (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("e2e", "e2e_s")):
        v = [r[0] for r in c.execute(f"select {col} from requests where model=? and status in ('ok','stop','length') and {col} is not null", (model,))]
        want = list(np.percentile(v, [50, 90, 99])) + [max(v)]
        got = [s[k][p] for p in ("p50", "p90", "p99", "max")]
        assert np.allclose(got, want, rtol=1e-12), (model, k, got, want)
        assert got == sorted(got)
assert st["gemma-3-270m"]["ok"] == 19
EOF
ok $? "stats: percentiles per model equal numpy's over the stored requests"

out=$("$tern" history --db "$db" rm "$sb" --json)
ok $? "rm ID"
[ "$(echo $out | tr -d ' \t')" = "{\"removed\":[$sb]}" ]; ok $? "rm --json says what was removed: $(echo $out)"
n=$("$tern" history --db "$db" list --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")
[ "$n" = 1 ]; ok $? "rm: one session left"
out=$("$tern" history --db "$db" search --json квокка)
[ "$out" = "[]" ]; ok $? "rm: its text left the search index"
"$tern" history --db "$db" show "$sb" 2>"$dir/err"; r=$?
[ $r = 1 ] && grep -q "no session with id $sb" "$dir/err"; ok $? "show of a missing id: status 1, says so"

"$tern" history --db "$db" frobnicate 2>/dev/null; [ $? = 2 ]; ok $? "unknown subcommand: usage error"
head -c 5000 /dev/urandom > "$dir/bad.db"
"$tern" history --db "$dir/bad.db" list 2>"$dir/err"; r=$?
[ $r = 1 ] && grep -q "bad.db: file is not a database" "$dir/err"
ok $? "corrupt database: status 1 and a clear message ($(head -c 200 "$dir/err"))"

tap_done
