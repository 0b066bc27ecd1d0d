# bash completion for tern: commands, their options (from each command's --help,
# itself made from the option table, so they cannot drift), model names for -m.
_tern() {
    local cur prev cmd
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    cmd=${COMP_WORDS[1]}
    local cmds="chat run bench eval history info models pull tokenize embed serve version help"
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$cmds -m --model --config --help --version" -- "$cur"))
        return
    fi
    case $prev in
        -m|--model)
            local d=${XDG_DATA_HOME:-$HOME/.local/share}/tern/models
            COMPREPLY=($(compgen -W "$(cd "$d" 2>/dev/null && ls *.gguf 2>/dev/null | sed 's/\.gguf$//')" -- "$cur")
                       $(compgen -f -X '!*.gguf' -- "$cur"))
            return ;;
        --backend) COMPREPLY=($(compgen -W "auto cpu cuda" -- "$cur")); return ;;
        --kv-type) COMPREPLY=($(compgen -W "f16 f32 q8_0" -- "$cur")); return ;;
        --context-policy) COMPREPLY=($(compgen -W "truncate reject" -- "$cur")); return ;;
        --balance) COMPREPLY=($(compgen -W "round-robin least-outstanding" -- "$cur")); return ;;
        --pooling) COMPREPLY=($(compgen -W "model mean cls last" -- "$cur")); return ;;
        help) COMPREPLY=($(compgen -W "$cmds" -- "$cur")); return ;;
    esac
    if [ "$cmd" = history ] && [ "$COMP_CWORD" -eq 2 ]; then
        COMPREPLY=($(compgen -W "list show search export rm stats" -- "$cur"))
        return
    fi
    if [[ $cur == -* ]]; then
        local opts
        opts=$(tern "$cmd" --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
        COMPREPLY=($(compgen -W "$opts -m --model --config --help" -- "$cur"))
    fi
}
complete -F _tern tern
