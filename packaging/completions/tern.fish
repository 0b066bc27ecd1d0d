# fish completion for tern: commands, every command's options (from its --help,
# itself made from the option table, so they cannot drift), model names.
set -l cmds chat run bench eval history info models pull tokenize embed serve version help
function __tern_opts
    set -l words (commandline -opc)
    tern $words[2] --help 2>/dev/null | string match -r -a -- '--[a-z][a-z0-9-]*' | sort -u
end
complete -c tern -n "__fish_seen_subcommand_from $cmds" -a '(__tern_opts)'
complete -c tern -l balance -x -a 'round-robin least-outstanding'
complete -c tern -l pooling -x -a 'model mean cls last'
complete -c tern -n '__fish_seen_subcommand_from chat' -l attach -d 'chat through a running tern serve'
complete -c tern -n '__fish_seen_subcommand_from serve' -l host -l port -l api-key-file -l access-log -r
complete -c tern -f
complete -c tern -n "not __fish_seen_subcommand_from $cmds" -a "$cmds"
complete -c tern -s m -l model -r -d 'model file or name' -a '(path basename -E (set -q XDG_DATA_HOME; and echo $XDG_DATA_HOME; or echo ~/.local/share)/tern/models/*.gguf 2>/dev/null)'
complete -c tern -l config -r -d 'configuration file'
complete -c tern -s h -l help -d 'help'
complete -c tern -l backend -x -a 'auto cpu cuda'
complete -c tern -l kv-type -x -a 'f16 f32 q8_0'
complete -c tern -l context-policy -x -a 'truncate reject'
complete -c tern -n '__fish_seen_subcommand_from history' -a 'list show search export rm stats'
complete -c tern -n '__fish_seen_subcommand_from run' -s p -l prompt -r
complete -c tern -n '__fish_seen_subcommand_from run' -s c -l continue
complete -c tern -n '__fish_seen_subcommand_from run chat' -l temp -l top-p -l top-k -l min-p -l seed -l system -l max-tokens -r
complete -c tern -n '__fish_seen_subcommand_from models history info run bench eval' -l json
complete -c tern -n '__fish_seen_subcommand_from run eval' -l raw
