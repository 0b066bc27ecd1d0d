# tmux_lib: what the terminal tests share, sourced after tests/tap.sh:
# helpers for the pane named "chat" of the tmux server SOCK, and
# tmux_setup NAME for a test of its own: the default model (MODEL; the test
# fails without it or tmux), a temporary data and config home (TMP, removed
# at exit with the tmux server), one tmux server per script (SOCK, from
# NAME) and the screen checker (CHECK).
# TERN_TEST_TIME_SCALE (tests/meson.build: 3 under ASan, 20 under TSan)
# stretches every wait's limit; a wait still returns as soon as its screen
# shows up, so the scale costs nothing when tern is fast.
TIME_SCALE=${TERN_TEST_TIME_SCALE:-1}
T() { tmux -L "$SOCK" "$@"; }
cap() { T capture-pane -p -N -t chat 2>/dev/null; }
show() { diag "screen: $1"; cap | sed 's/^/  |/; s/$/|/' | while IFS= read -r l; do diag "$l"; done; }
keys() { T send-keys -t chat "$@"; }
text() { T send-keys -t chat -l "$1"; }
# wait_for REGEX SECONDS: polls the screen until the extended regex matches,
# for at most SECONDS x TIME_SCALE.
wait_for() {
    local i n=$(( $2 * 5 * TIME_SCALE ))
    for ((i = 0; i < n; i++)); do
        cap | grep -Eq -- "$1" && return 0
        sleep 0.2
    done
    return 1
}

# The model path is taken before XDG_DATA_HOME moves: fetch-model looks in
# the real data directory.
tmux_setup() {
    MODEL=$("$TERN_SRC/packaging/fetch-model" --print-path 2>/dev/null)
    if [ -z "$MODEL" ] || [ ! -r "$MODEL" ]; then
        ok 1 "default model available (packaging/fetch-model --print-path)"
        tap_done; exit 1
    fi
    command -v tmux >/dev/null || { ok 1 "tmux installed"; tap_done; exit 1; }
    TMP=$(mktemp -d)
    SOCK="tern-$1-$$"
    trap 'tmux -L "$SOCK" kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
    export XDG_DATA_HOME="$TMP/data" XDG_CONFIG_HOME="$TMP/config"
    CHECK="$TERN_SRC/tests/e2e/ui/check_screen.py"
}
