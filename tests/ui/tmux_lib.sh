# tmux_lib: what the terminal tests share, sourced after tests/app/tap.sh with
# SOCK set (one tmux server per script). The pane is named "chat".
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
