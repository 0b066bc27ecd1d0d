# model_env.sh: the set-up of the end-to-end scripts that run the default
# model, sourced after tests/tap.sh. MODEL is the default model (the script
# fails at once without it); TMP a fresh directory removed at exit (a script
# with more to clean up sets its own trap, removing "$TMP" as well); tern's
# XDG directories (data, config, state) inside it and TERN_MODEL unset, so
# the user's models, config, history and cached limits neither leak in nor
# get written.
MODEL=$("$TERN_SRC/packaging/fetch-model" --print-path 2>/dev/null)
if [ -z "$MODEL" ] || [ ! -r "$MODEL" ]; then
    ok 1 "default model available (packaging/fetch-model --print-path)"
    tap_done; exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export XDG_DATA_HOME="$TMP/data" XDG_CONFIG_HOME="$TMP/config" XDG_STATE_HOME="$TMP/state"
unset TERN_MODEL
