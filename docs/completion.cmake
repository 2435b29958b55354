# SPDX-License-Identifier: MIT
# Generates bash and zsh completion for autobatch from `autobatch --help`,
# the one source of the options: every "--option" it lists, the values it
# spells out ("--checkpointing off|on|both"), the preset names of
# `autobatch presets` for --preset, files for FILE, DIR and TRACES
# arguments, the subcommands of its usage lines, and the command's own
# completion after "--".
#   cmake -DAUTOBATCH=<binary> -DBASH=<file> -DZSH=<file> -P completion.cmake
cmake_minimum_required(VERSION 3.18)
execute_process(COMMAND "${AUTOBATCH}" --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "autobatch --help failed (${rc})")
endif()
execute_process(COMMAND "${AUTOBATCH}" presets OUTPUT_VARIABLE preset_list RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "autobatch presets failed (${rc})")
endif()
string(REGEX MATCHALL "(^|\n)[a-z0-9][a-z0-9._-]*" preset_words "${preset_list}")
string(REPLACE "\n" "" preset_words "${preset_words}")
list(JOIN preset_words " " preset_words)
# a CMake list is split at ';' except inside [...]: keep brackets out of it
string(REPLACE ";" "," help "${help}")
string(REPLACE "[" "<" help "${help}")
string(REPLACE "]" ">" help "${help}")
string(REPLACE "\n" ";" lines "${help}")
set(opts "")
set(cases "")
set(zsh_specs "")
set(subs "")
# First the values that depend on where they are said: each subcommand's
# own --format (report: markdown|html|junit, matrix: markdown|json), and
# the webhook formats named in the option's prose ("generic, ... or teams").
set(format_cases "")
set(webhook_words "")
foreach(line IN LISTS lines)
  if(line MATCHES "^(usage:|      ) +autobatch ([a-z]+) .*--format ([a-z|]+)")
    string(REPLACE "|" " " fw "${CMAKE_MATCH_3}")
    string(APPEND format_cases "        ${CMAKE_MATCH_2}) w=\"${fw}\" ;;\n")
  endif()
  if(line MATCHES "^  --webhook-format F +([a-z, ]+)")
    string(REGEX MATCHALL "[a-z]+" ww "${CMAKE_MATCH_1}")
    list(REMOVE_ITEM ww "or")
    list(JOIN ww " " webhook_words)
  endif()
endforeach()
foreach(line IN LISTS lines)
  if(line MATCHES "^(usage:|      ) +autobatch ([a-z]+)( |$)")
    list(APPEND subs "${CMAKE_MATCH_2}")
  endif()
  # each "--name [ARG]" of an option's entry or a usage line (an entry may
  # list several: "--markdown FILE, --junit FILE"); not the prose and the
  # examples, whose --flags belong to other programs
  if(NOT line MATCHES "^(  -|usage:|       autobatch)")
    continue()
  endif()
  string(REGEX MATCHALL "--[a-z][a-z-]*( [A-Za-z0-9|:._-]+)?" found "${line}")
  foreach(f IN LISTS found)
    if(NOT f MATCHES "^(--[a-z][a-z-]*)( (.*))?$")
      continue()
    endif()
    set(name "${CMAKE_MATCH_1}")
    set(arg "${CMAKE_MATCH_3}")
    if(name IN_LIST opts OR name STREQUAL "--")
      continue()
    endif()
    list(APPEND opts "${name}")
    if(name STREQUAL "--format")
      # the values depend on the subcommand: its usage line says them
      string(APPEND cases "    --format) local w=\"markdown\"; case \${COMP_WORDS[1]} in\n${format_cases}      esac; COMPREPLY=($(compgen -W \"\$w\" -- \"\$cur\")); return ;;\n")
      string(APPEND zsh_specs "  '${name}:format:(markdown html junit json)' \\\n")
    elseif(arg MATCHES "^[A-Za-z0-9-]+(\\|[A-Za-z0-9-]+)+$" AND arg MATCHES "[a-z]")
      string(REPLACE "|" ";" alts "${arg}")
      set(words "")
      foreach(a IN LISTS alts)
        if(a MATCHES "^[a-z0-9-]+$")
          string(APPEND words " ${a}")
        endif()
      endforeach()
      if(name STREQUAL "--preset")
        set(words " ${preset_words}")
      endif()
      string(STRIP "${words}" words)
      set(files "")
      if(arg MATCHES "FILE")
        set(files " -f")
      endif()
      string(APPEND cases "    ${name}) COMPREPLY=($(compgen${files} -W \"${words}\" -- \"$cur\")); return ;;\n")
      string(APPEND zsh_specs "  '${name}:value:(${words})' \\\n")
    elseif(arg STREQUAL "F" AND name STREQUAL "--webhook-format")
      string(APPEND cases "    ${name}) COMPREPLY=($(compgen -W \"${webhook_words}\" -- \"\$cur\")); return ;;\n")
      string(APPEND zsh_specs "  '${name}:format:(${webhook_words})' \\\n")
    elseif(arg MATCHES "(^|\\|)D$")
      # a duration: the number typed so far with each unit
      string(APPEND cases "    ${name}) [[ \$cur =~ ^[0-9.]+$ ]] && COMPREPLY=(\"\${cur}s\" \"\${cur}m\" \"\${cur}h\"); return ;;\n")
      string(APPEND zsh_specs "  '${name}:duration (90s, 10m, 2h): ' \\\n")
    elseif(arg STREQUAL "SIZE")
      # a size: the number typed so far with each binary unit
      string(APPEND cases "    ${name}) [[ \$cur =~ ^[0-9.]+$ ]] && COMPREPLY=(\"\${cur}M\" \"\${cur}G\" \"\${cur}T\"); return ;;\n")
      string(APPEND zsh_specs "  '${name}:size (512M, 24G): ' \\\n")
    elseif(arg MATCHES "(FILE|DIR)")
      string(APPEND cases "    ${name}) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n")
      string(APPEND zsh_specs "  '${name}:file:_files' \\\n")
    elseif(arg MATCHES "^[A-Z]" OR arg MATCHES "^[A-Z]+[|:]")
      string(APPEND cases "    ${name}) return ;;\n")
      string(APPEND zsh_specs "  '${name}:value: ' \\\n")
    else()
      string(APPEND zsh_specs "  '${name}' \\\n")
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES subs)
list(JOIN opts " " opt_words)
list(JOIN subs " " sub_words)
file(WRITE "${BASH}" "# bash completion for autobatch; generated from `autobatch --help` (docs/completion.cmake)
_autobatch() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} i
  for ((i = 1; i < COMP_CWORD; i++)); do
    if [ \"\${COMP_WORDS[i]}\" = -- ]; then
      # the command to tune: a command name, then its own arguments
      if ((i == COMP_CWORD - 1)); then
        mapfile -t COMPREPLY < <(compgen -c -- \"\$cur\")
      else
        mapfile -t COMPREPLY < <(compgen -f -- \"\$cur\")
      fi
      return
    fi
  done
  case \$prev in
${cases}  esac
  if [[ \$cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W \"${opt_words} --\" -- \"\$cur\")
  elif ((COMP_CWORD == 1)) || { ((COMP_CWORD == 2)) && [ \"\${COMP_WORDS[1]}\" = help ]; }; then
    mapfile -t COMPREPLY < <(compgen -W \"${sub_words}\" -- \"\$cur\")
  else
    mapfile -t COMPREPLY < <(compgen -f -- \"\$cur\")
  fi
}
complete -F _autobatch autobatch
")
file(WRITE "${ZSH}" "#compdef autobatch
# zsh completion for autobatch; generated from `autobatch --help` (docs/completion.cmake)
_arguments -S \\
${zsh_specs}  '1::subcommand:(${sub_words})' \\
  '*::command:_normal' \
")
