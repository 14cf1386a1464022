# bash completion for cairn                                  -*- shell-script -*-
#
# Load it with `source <(cairn completion bash)`, or install it as
# /usr/share/bash-completion/completions/cairn. Self-contained: it does not need the
# bash-completion package.

# Ids of experiments and trials in the store, one per line, from the hidden
# `cairn __complete ids` (experiments are the lines without a dot); a --store given on
# the command line is passed along.
_cairn_ids() {
  local program=${COMP_WORDS[0]}
  local -a store=()
  local i
  for ((i = 1; i < ${#_cairn_words[@]}; i++)); do
    case ${_cairn_words[i]} in
      --store) store=(--store "${_cairn_words[i + 1]}") ;;
      --store=*) store=(--store "${_cairn_words[i]#--store=}") ;;
    esac
  done
  command -v "$program" >/dev/null 2>&1 || program=cairn
  "$program" "${store[@]}" __complete ids 2>/dev/null
}

# Bash splits words at "=" (COMP_WORDBREAKS), so `--set a=b` arrives as four words.
# Glue them back so that options and positionals are counted as the user sees them.
_cairn_join_words() {
  _cairn_words=()
  _cairn_cword=0
  local i glue=0 word
  for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
    word=${COMP_WORDS[i]}
    if [[ $word == "=" ]] && ((i > 1)); then
      _cairn_words[-1]+=$word
      glue=1
    elif ((glue)); then
      _cairn_words[-1]+=$word
      glue=0
    else
      _cairn_words+=("$word")
    fi
    ((i == COMP_CWORD)) && _cairn_cword=$((${#_cairn_words[@]} - 1))
  done
  return 0
}

# Offers the words of $1 (separated by blanks or newlines) that start with $2.
_cairn_compgen_words() {
  mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -W "$1" -- "$2")
}

_cairn_complete_files() {
  local cur=$1 suffixes=$2 path
  compopt -o filenames 2>/dev/null
  while IFS= read -r path; do
    if [[ -d $path ]]; then
      COMPREPLY+=("$path")
    elif [[ -n $suffixes && $path =~ \.($suffixes)$ ]]; then
      COMPREPLY+=("$path")
    fi
  done < <(compgen -f -- "$cur")
}

_cairn_complete_dirs() {
  compopt -o filenames 2>/dev/null
  mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -d -- "$1")
}

# The value of --key-file (a file) or --peers (HOST:PORT,… or auto) when $1, the word before,
# is one of them, for the commands that reach agents; returns 1 when it is neither.
_cairn_complete_peer_option() {
  case $1 in
    --key-file)
      compopt -o filenames 2>/dev/null
      mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -f -- "$2")
      ;;
    --peers) _cairn_compgen_words "auto" "$2" ;;
    *) return 1 ;;
  esac
}

# The positional argument of COMMAND that is being completed (1, 2, …).
_cairn_positional_index() {
  local takes_value=$1 n=0 i word
  for ((i = _cairn_command_at + 1; i < _cairn_cword; i++)); do
    word=${_cairn_words[i]}
    if [[ $word == -* ]]; then
      [[ " $takes_value " == *" $word "* ]] && ((i++))
    else
      ((n++))
    fi
  done
  echo $((n + 1))
}

_cairn() {
  local commands="init run resume pause kill ls show compare logs metrics checkpoints best watch report export gc reproduce doctor agent peers version help completion"
  local global_options="--store -h --help --version"
  local -a _cairn_words
  local _cairn_cword _cairn_command_at=0
  _cairn_join_words
  COMPREPLY=()

  local cur=${COMP_WORDS[COMP_CWORD]}
  [[ $cur == "=" ]] && cur=""
  local word=${_cairn_words[_cairn_cword]}
  local prev=${_cairn_words[_cairn_cword - 1]}

  # The command is the first word that is neither an option nor the value of --store.
  local i command=""
  for ((i = 1; i < _cairn_cword; i++)); do
    case ${_cairn_words[i]} in
      --store) ((i++)) ;;
      -*) ;;
      *)
        command=${_cairn_words[i]}
        _cairn_command_at=$i
        break
        ;;
    esac
  done

  if [[ $prev == --store || $word == --store=* ]]; then
    _cairn_complete_dirs "$cur"
    return 0
  fi
  if [[ -z $command ]]; then
    if [[ $cur == -* ]]; then
      _cairn_compgen_words "$global_options" "$cur"
    else
      _cairn_compgen_words "$commands" "$cur"
    fi
    return 0
  fi

  local options="" takes_value="" ids=""
  case $command in
    init) ;;
    run)
      options="--set --name --detach --slots --peers --key-file"
      _cairn_complete_peer_option "$prev" "$cur" && return 0
      takes_value="--set --name --slots --peers --key-file"
      ;;
    resume)
      options="--all --key-file"
      _cairn_complete_peer_option "$prev" "$cur" && return 0
      takes_value="--key-file"
      ;;
    pause | kill) ;;
    ls) options="--all --json" ;;
    show | checkpoints) options="--json" ;;
    logs)
      options="-f --follow --rank --tail"
      takes_value="--rank --tail"
      ;;
    metrics) options="--json --csv" ;;
    best) options="--checkpoint" ;;
    report)
      options="-o --output"
      if [[ $prev == -o || $prev == --output ]]; then
        _cairn_complete_files "$cur" "html|htm"
        return 0
      fi
      takes_value="-o --output"
      ;;
    watch)
      options="--interval"
      takes_value="--interval"
      ;;
    gc) options="--json" ;;
    compare) options="--json --diff" ;;
    reproduce)
      options="--verify --allow-data-change --slots --peers --key-file"
      _cairn_complete_peer_option "$prev" "$cur" && return 0
      takes_value="--slots --peers --key-file"
      ;;
    doctor) options="--json" ;;
    agent)
      options="--listen --slots --key-file --dir --new-key --announce-interval --no-announce --announce-to --beacon-port --keep-days --max-cache"
      if [[ $prev == --key-file || $prev == --new-key ]]; then
        compopt -o filenames 2>/dev/null
        mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -f -- "$cur")
        return 0
      fi
      if [[ $prev == --dir ]]; then
        _cairn_complete_dirs "$cur"
        return 0
      fi
      takes_value="--listen --slots --key-file --dir --new-key --announce-interval --announce-to --beacon-port --keep-days --max-cache"
      ;;
    peers)
      options="--peers --key-file --timeout --discover --beacon-port --json"
      _cairn_complete_peer_option "$prev" "$cur" && return 0
      takes_value="--peers --key-file --timeout --discover --beacon-port"
      ;;
    version) options="--json" ;;
    help | export | completion) ;;
    *) return 0 ;;
  esac
  # The values of these options are free text or numbers: nothing to offer.
  [[ -n $takes_value && " $takes_value " == *" $prev "* ]] && return 0
  if [[ $cur == -* ]]; then
    _cairn_compgen_words "$options -h --help" "$cur"
    return 0
  fi

  local position
  position=$(_cairn_positional_index "$takes_value")
  case $command:$position in
    init:1) _cairn_complete_dirs "$cur" ;;
    run:1) _cairn_complete_files "$cur" "yaml|yml" ;;
    show:1 | checkpoints:1) _cairn_compgen_words "$(_cairn_ids)" "$cur" ;;
    resume:1)
      # `resume --all` takes no experiment.
      for ((i = _cairn_command_at + 1; i < _cairn_cword; i++)); do
        [[ ${_cairn_words[i]} == --all ]] && return 0
      done
      ids=$(_cairn_ids | grep -vF .)
      _cairn_compgen_words "--all $ids" "$cur"
      ;;
    pause:1 | kill:1 | best:1 | watch:1 | gc:1 | report:*)
      ids=$(_cairn_ids | grep -vF .)
      _cairn_compgen_words "$ids" "$cur"
      ;;
    compare:*) _cairn_compgen_words "$(_cairn_ids)" "$cur" ;;
    logs:1 | metrics:1 | reproduce:1)
      ids=$(_cairn_ids | grep -F .)
      _cairn_compgen_words "$ids" "$cur"
      ;;
    export:1)
      ids=$(_cairn_ids | grep -F . | sed -e 's/$/@latest/p' -e 's/@latest$/@best/')
      _cairn_compgen_words "$ids" "$cur"
      ;;
    export:2) _cairn_complete_dirs "$cur" ;;
    help:1) _cairn_compgen_words "$commands" "$cur" ;;
    completion:1) _cairn_compgen_words "bash zsh fish" "$cur" ;;
  esac
  return 0
}

complete -F _cairn cairn
