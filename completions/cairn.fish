# fish completion for cairn.
#
# Install it as cairn.fish in a directory on $fish_complete_path (for example
# /usr/local/share/fish/vendor_completions.d), or load it with
# `cairn completion fish | source`.

# Prints the cairn command on the line so far (the first word that is neither an
# option nor the value of --store); fails when there is none yet.
function __cairn_command
    set -l tokens (commandline -opc)
    set -l i 2
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case --store
                set i (math $i + 1)
            case '-*'
            case '*'
                echo $tokens[$i]
                return 0
        end
        set i (math $i + 1)
    end
    return 1
end

function __cairn_needs_command
    not __cairn_command >/dev/null
end

function __cairn_using_command
    set -l cmd (__cairn_command)
    or return 1
    contains -- $cmd $argv
end

# True when the word being completed is argument number $argv[1] of the command.
function __cairn_at_argument
    set -l tokens (commandline -opc)
    set -l arguments 0
    set -l seen_command 0
    set -l i 2
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case --store --set --name --slots --peers --key-file --rank --tail --interval -o --output
                set i (math $i + 1)
            case '-*'
            case '*'
                if test $seen_command = 1
                    set arguments (math $arguments + 1)
                else
                    set seen_command 1
                end
        end
        set i (math $i + 1)
    end
    test $arguments -eq (math $argv[1] - 1)
end

# Config files (*.yaml, *.yml) and directories that complete the word, as bash's and
# zsh's completions offer: __fish_complete_suffix lists every other file after those.
function __cairn_configs
    __fish_complete_suffix .yaml | string match -r -- '^.*(?:\.ya?ml|/)$'
end

# Ids of experiments and trials, one per line, from the hidden `cairn __complete ids`
# (experiments are the lines without a dot). $argv[1] selects: all (experiments and
# trials), experiments, trials, or checkpoints (TRIAL@latest and TRIAL@best).
function __cairn_ids
    set -l tokens (commandline -opc)
    set -l program $tokens[1]
    set -l store
    set -l i 2
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case --store
                set store --store $tokens[(math $i + 1)]
            case '--store=*'
                set store --store (string replace -- --store= '' $tokens[$i])
        end
        set i (math $i + 1)
    end
    type -q $program; or set program cairn
    set -l ids ($program $store __complete ids 2>/dev/null)
    # `string match` with no arguments would read standard input.
    set -q ids[1]; or return 0
    switch $argv[1]
        case experiments
            string match -v -- '*.*' $ids
        case trials
            string match -- '*.*' $ids
        case checkpoints
            for id in (string match -- '*.*' $ids)
                echo $id@latest
                echo $id@best
            end
        case '*'
            printf '%s\n' $ids
    end
end

complete -c cairn -f

# Global options and the commands.
complete -c cairn -n __cairn_needs_command -l store -x -a '(__fish_complete_directories)' -d 'Use the store in DIR instead of the nearest .cairn/'
complete -c cairn -n __cairn_needs_command -l version -d 'Print the version and exit'
complete -c cairn -s h -l help -d 'Print help and exit'
complete -c cairn -n __cairn_needs_command -a init -d 'Create a store (.cairn/) in DIR'
complete -c cairn -n __cairn_needs_command -a run -d 'Create an experiment and drive it to the end'
complete -c cairn -n __cairn_needs_command -a resume -d 'Continue an interrupted or paused experiment'
complete -c cairn -n __cairn_needs_command -a pause -d 'Pause an experiment (resumable)'
complete -c cairn -n __cairn_needs_command -a kill -d 'Stop an experiment for good'
complete -c cairn -n __cairn_needs_command -a ls -d 'List experiments'
complete -c cairn -n __cairn_needs_command -a show -d 'Show an experiment or a trial'
complete -c cairn -n __cairn_needs_command -a compare -d 'Show trials side by side and name what differs'
complete -c cairn -n __cairn_needs_command -a logs -d 'Print the output of a trial'
complete -c cairn -n __cairn_needs_command -a metrics -d 'Print the metric series of a trial'
complete -c cairn -n __cairn_needs_command -a checkpoints -d 'List checkpoints'
complete -c cairn -n __cairn_needs_command -a best -d 'Print the best trial (or its best checkpoint, exported)'
complete -c cairn -n __cairn_needs_command -a report -d 'Write experiments as one self-contained HTML file'
complete -c cairn -n __cairn_needs_command -a watch -d 'Live view of an experiment'
complete -c cairn -n __cairn_needs_command -a export -d 'Write the files of a checkpoint into DIR'
complete -c cairn -n __cairn_needs_command -a gc -d 'Apply the checkpoint retention policy now'
complete -c cairn -n __cairn_needs_command -a reproduce -d 'Re-run a trial from what was recorded'
complete -c cairn -n __cairn_needs_command -a doctor -d 'Check the environment'
complete -c cairn -n __cairn_needs_command -a agent -d "Serve this machine's slots to other machines"
complete -c cairn -n __cairn_needs_command -a peers -d 'List the agents this machine can use'
complete -c cairn -n __cairn_needs_command -a version -d 'Print version and build details'
complete -c cairn -n __cairn_needs_command -a help -d 'Describe a command'
complete -c cairn -n __cairn_needs_command -a completion -d 'Print a shell completion script'

# init [DIR]
complete -c cairn -n '__cairn_using_command init; and __cairn_at_argument 1' -a '(__fish_complete_directories)'

# run CONFIG.yaml [--set KEY=VALUE]... [--name NAME] [--detach] [--slots N] [--peers HOST:PORT,...|auto] [--key-file F]
complete -c cairn -n '__cairn_using_command run' -l set -x -d 'Override a config key (KEY=VALUE)'
complete -c cairn -n '__cairn_using_command run' -l name -x -d 'Name the experiment'
complete -c cairn -n '__cairn_using_command run' -l detach -d 'Start the experiment in the background and return'
complete -c cairn -n '__cairn_using_command run' -l slots -x -d 'Slots to use on this machine (0: the peers only)'
complete -c cairn -n '__cairn_using_command run' -l peers -x -a 'auto' -d 'Agents to run trials on too (HOST:PORT,... or auto)'
complete -c cairn -n '__cairn_using_command run' -l key-file -r -F -d 'Cluster key file for --peers'
complete -c cairn -n '__cairn_using_command run; and __cairn_at_argument 1' -k -a '(__cairn_configs)'

# resume EXP | resume --all [--key-file F]
complete -c cairn -n '__cairn_using_command resume' -l all -d 'Resume every interrupted experiment in the background'
complete -c cairn -n '__cairn_using_command resume' -l key-file -r -F -d 'Cluster key file for the agents'
complete -c cairn -n '__cairn_using_command resume; and __cairn_at_argument 1; and not contains -- --all (commandline -opc)' -a '(__cairn_ids experiments)' -d Experiment

# pause EXP, kill EXP
complete -c cairn -n '__cairn_using_command pause kill; and __cairn_at_argument 1' -a '(__cairn_ids experiments)' -d Experiment

# ls [--all] [--json]
complete -c cairn -n '__cairn_using_command ls' -l all -d 'Include canceled experiments'
complete -c cairn -n '__cairn_using_command ls' -l json -d 'Print JSON'

# show ID [--json]
complete -c cairn -n '__cairn_using_command show' -l json -d 'Print JSON'
complete -c cairn -n '__cairn_using_command show; and __cairn_at_argument 1' -a '(__cairn_ids all)' -d 'Experiment or trial'

# logs TRIAL [-f|--follow] [--rank N] [--tail N]
complete -c cairn -n '__cairn_using_command logs' -s f -l follow -d 'Keep printing output as it arrives'
complete -c cairn -n '__cairn_using_command logs' -l rank -x -d 'The output of this rank'
complete -c cairn -n '__cairn_using_command logs' -l tail -x -d 'Only the last N lines'
complete -c cairn -n '__cairn_using_command logs; and __cairn_at_argument 1' -a '(__cairn_ids trials)' -d Trial

# metrics TRIAL [--json|--csv]
complete -c cairn -n '__cairn_using_command metrics' -l json -d 'Print JSON'
complete -c cairn -n '__cairn_using_command metrics' -l csv -d 'Print CSV'
complete -c cairn -n '__cairn_using_command metrics; and __cairn_at_argument 1' -a '(__cairn_ids trials)' -d Trial

# checkpoints ID [--json]
complete -c cairn -n '__cairn_using_command checkpoints' -l json -d 'Print JSON'
complete -c cairn -n '__cairn_using_command checkpoints; and __cairn_at_argument 1' -a '(__cairn_ids all)' -d 'Experiment or trial'

# report EXP... -o FILE.html
complete -c cairn -n '__cairn_using_command report' -s o -l output -r -F -d 'The HTML file to write'
complete -c cairn -n '__cairn_using_command report' -a '(__cairn_ids experiments)' -d Experiment
# best EXP [--checkpoint]
complete -c cairn -n '__cairn_using_command best' -l checkpoint -d 'Export the best checkpoint and print its path'
complete -c cairn -n '__cairn_using_command best; and __cairn_at_argument 1' -a '(__cairn_ids experiments)' -d Experiment

# watch EXP [--interval SECONDS]
complete -c cairn -n '__cairn_using_command watch' -l interval -x -d 'Seconds between redraws'
complete -c cairn -n '__cairn_using_command watch; and __cairn_at_argument 1' -a '(__cairn_ids experiments)' -d Experiment

# export CKPT DIR
complete -c cairn -n '__cairn_using_command export; and __cairn_at_argument 1' -a '(__cairn_ids checkpoints)' -d Checkpoint
complete -c cairn -n '__cairn_using_command export; and __cairn_at_argument 2' -a '(__fish_complete_directories)'

# gc [EXP] [--json]
complete -c cairn -n '__cairn_using_command gc' -l json -d 'Print JSON'
complete -c cairn -n '__cairn_using_command gc; and __cairn_at_argument 1' -a '(__cairn_ids experiments)' -d Experiment

# compare ID ID... [--json] [--diff]
complete -c cairn -n '__cairn_using_command compare' -l json -d 'Print JSON'
complete -c cairn -n '__cairn_using_command compare' -l diff -d 'Also print the code changes as a patch'
complete -c cairn -n '__cairn_using_command compare' -a '(__cairn_ids all)' -d 'Trial or experiment'

# reproduce TRIAL [--verify] [--allow-data-change] [--slots N] [--peers HOST:PORT,...|auto] [--key-file F]
complete -c cairn -n '__cairn_using_command reproduce' -l verify -d 'Compare the new metrics with the recorded ones'
complete -c cairn -n '__cairn_using_command reproduce' -l allow-data-change -d 'Re-run even when data too large to keep has changed'
complete -c cairn -n '__cairn_using_command reproduce' -l slots -x -d 'Number of slots to use here (0: the peers only)'
complete -c cairn -n '__cairn_using_command reproduce' -l peers -x -a 'auto' -d 'Also run the ranks on these agents (HOST:PORT,... or auto)'
complete -c cairn -n '__cairn_using_command reproduce' -l key-file -r -F -d 'Cluster key file for --peers'
complete -c cairn -n '__cairn_using_command reproduce; and __cairn_at_argument 1' -a '(__cairn_ids trials)' -d Trial

# doctor [--json]
complete -c cairn -n '__cairn_using_command doctor' -l json -d 'Print JSON'

# agent [--listen ADDR:PORT] [--slots N] [--key-file F] [--dir DIR] [--new-key F]
#       [--announce-interval SECONDS] [--no-announce] [--announce-to HOST[:PORT],...] [--beacon-port PORT]
#       [--keep-days DAYS] [--max-cache SIZE]
complete -c cairn -n '__cairn_using_command agent' -l listen -x -d 'Address to listen on (ADDR:PORT)'
complete -c cairn -n '__cairn_using_command agent' -l slots -x -d 'Slots to offer'
complete -c cairn -n '__cairn_using_command agent' -l key-file -r -F -d 'Cluster key file'
complete -c cairn -n '__cairn_using_command agent' -l dir -x -a '(__fish_complete_directories)' -d 'Where the agent keeps its work'
complete -c cairn -n '__cairn_using_command agent' -l new-key -r -F -d 'Write a new cluster key to FILE and exit'
complete -c cairn -n '__cairn_using_command agent' -l announce-interval -x -d 'Seconds between discovery beacons'
complete -c cairn -n '__cairn_using_command agent' -l no-announce -d 'Send no discovery beacons'
complete -c cairn -n '__cairn_using_command agent' -l announce-to -x -d 'Also send beacons to these addresses (HOST[:PORT],...)'
complete -c cairn -n '__cairn_using_command agent' -l beacon-port -x -d 'UDP port of the discovery beacons'
complete -c cairn -n '__cairn_using_command agent' -l keep-days -x -d 'Remove what was not used for DAYS'
complete -c cairn -n '__cairn_using_command agent' -l max-cache -x -d 'Keep the cache under SIZE'

# peers [--peers HOST:PORT,...|auto] [--key-file F] [--timeout SECONDS] [--discover SECONDS]
#       [--beacon-port PORT] [--json]
complete -c cairn -n '__cairn_using_command peers' -l peers -x -a 'auto' -d 'Agents to ask (HOST:PORT,... or auto)'
complete -c cairn -n '__cairn_using_command peers' -l key-file -r -F -d 'Cluster key file'
complete -c cairn -n '__cairn_using_command peers' -l timeout -x -d 'Seconds to wait for every peer'
complete -c cairn -n '__cairn_using_command peers' -l discover -x -d 'Seconds to listen for beacons'
complete -c cairn -n '__cairn_using_command peers' -l beacon-port -x -d 'UDP port to listen on for beacons'
complete -c cairn -n '__cairn_using_command peers' -l json -d 'Print JSON'

# version [--json]
complete -c cairn -n '__cairn_using_command version' -l json -d 'Print JSON'

# help [COMMAND]
complete -c cairn -n '__cairn_using_command help; and __cairn_at_argument 1' -a 'init run resume pause kill ls show compare logs metrics checkpoints best watch report export gc reproduce doctor agent peers version help completion'

# completion bash|zsh|fish
complete -c cairn -n '__cairn_using_command completion; and __cairn_at_argument 1' -a 'bash zsh fish'
