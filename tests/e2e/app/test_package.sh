#!/bin/bash
# test_package: tern installs like a package. `meson install` of this build
# into a staging root puts a man page for every subcommand (scdoc), bash,
# zsh and fish completions and the data files; packaging/make-deb builds a
# .deb with dpkg-deb; the .deb is unpacked into a temporary root and its
# binary answers --version, lists the models, its man page opens with
# man -l, and it generates a one-shot reply.
set -u
. "$TERN_SRC/tests/tap.sh"
MODEL=$("$TERN_SRC/packaging/fetch-model" --print-path 2>/dev/null)
if [ -z "$MODEL" ] || [ ! -r "$MODEL" ]; then
    ok 1 "default model available (packaging/fetch-model --print-path)"
    XDG_DATA_HOME="$TMP/empty" TERN_MODEL= "$bin" run -p hi >/dev/null 2>"$TMP/e"
grep -q "$(dirname "$(dirname "$bin")")/share/tern/fetch-model" "$TMP/e" 2>/dev/null ||
    grep -q '/bin/../share/tern/fetch-model' "$TMP/e"
ok $? "without a model the installed binary names its installed fetcher: $(head -c 160 "$TMP/e")"
tap_done; exit 1
fi
command -v scdoc >/dev/null || { ok 1 "scdoc installed (packaging/install-deps)"; XDG_DATA_HOME="$TMP/empty" TERN_MODEL= "$bin" run -p hi >/dev/null 2>"$TMP/e"
grep -q "$(dirname "$(dirname "$bin")")/share/tern/fetch-model" "$TMP/e" 2>/dev/null ||
    grep -q '/bin/../share/tern/fetch-model' "$TMP/e"
ok $? "without a model the installed binary names its installed fetcher: $(head -c 160 "$TMP/e")"
tap_done; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export XDG_DATA_HOME="$TMP/data" XDG_CONFIG_HOME="$TMP/config"
mkdir -p "$XDG_DATA_HOME/tern/models"
ln -s "$MODEL" "$XDG_DATA_HOME/tern/models/$(basename "$MODEL")"

meson install -C "$TERN_BUILD" --destdir "$TMP/stage" --no-rebuild >/dev/null 2>"$TMP/e"
ok $? "meson install into a staging root"
share=$(dirname "$(find "$TMP/stage" -path '*/share/tern/fetch-model' | head -1)")/..
# every command tern --help lists (serve included)
for c in tern $("$bin" --help | awk '/^  [a-z]+ /{print "tern-" $1}'); do
    [ -s "$share/man/man1/$c.1" ] || { diag "no man page $c.1"; false; } || break
done
ok $? "a man page for every subcommand"
[ -s "$share/bash-completion/completions/tern" ] && [ -s "$share/zsh/site-functions/_tern" ] &&
    [ -s "$share/fish/vendor_completions.d/tern.fish" ]
ok $? "bash, zsh and fish completions"
bash -c ". '$share/bash-completion/completions/tern'; COMP_WORDS=(tern hi); COMP_CWORD=1; _tern; printf '%s\n' \"\${COMPREPLY[@]}\"" | grep -qx history
ok $? "the bash completion completes commands (hi -> history)"
[ -s "$share/tern/bench-texts.txt" ] && [ -x "$share/tern/fetch-model" ]; ok $? "data files installed"

deb=$("$TERN_SRC/packaging/make-deb" "$TERN_BUILD" "$TMP" 2>"$TMP/e")
ok $? "make-deb builds a .deb ($(basename "${deb:-none}"))"
dpkg-deb -f "$deb" Package Version Depends >"$TMP/ctl" 2>&1 && grep -q '^Package: tern' "$TMP/ctl"
ok $? "the package's control: $(tr '\n' ' ' <"$TMP/ctl" | cut -c1-120)"
dpkg-deb -x "$deb" "$TMP/root"; ok $? "unpacked into a temporary root"
bin=$(find "$TMP/root" -path '*/bin/tern' | head -1)
"$bin" --version | grep -q '^tern '; ok $? "installed tern --version"
"$bin" models | grep -q '^SmolLM2-135M-Instruct.Q4_1 '; ok $? "installed tern models"
man=$(find "$TMP/root" -name 'tern-run.1' | head -1)
MANPAGER=cat man -l "$man" 2>/dev/null | grep -q 'generate one reply'; ok $? "man -l on the installed tern-run(1)"
out=$("$bin" run -m smollm2 --no-history --temp 0 -n 6 "Say hello." 2>"$TMP/e")
[ -n "$out" ]; ok $? "a one-shot reply from the installed binary: $out"
XDG_DATA_HOME="$TMP/empty" TERN_MODEL= "$bin" run -p hi >/dev/null 2>"$TMP/e"
grep -q "$(dirname "$(dirname "$bin")")/share/tern/fetch-model" "$TMP/e" 2>/dev/null ||
    grep -q '/bin/../share/tern/fetch-model' "$TMP/e"
ok $? "without a model the installed binary names its installed fetcher: $(head -c 160 "$TMP/e")"
tap_done
