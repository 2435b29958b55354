# SPDX-License-Identifier: MIT
# Generates the man page autobatch(1): the hand-written page docs/autobatch.1.in
# with its @SYNOPSIS@ and @OPTIONS@ filled from `autobatch --help`, the one
# source of the usage lines and the options' text, so that the page and the
# binary never disagree, and @VERSION@ with the version.
#   cmake -DAUTOBATCH=<binary> -DVERSION=<x.y.z> -DTEMPLATE=<autobatch.1.in>
#         -DOUT=<autobatch.1> -P man.cmake
# Layout of the help text this reads: a usage block ("usage: autobatch ..."
# and lines indented by 7 spaces), then sections whose heading line ends
# with ':' and whose entries start with "  -": the entry's tag runs to the
# first two spaces, its text goes on over the lines indented further.  A
# section without such entries (the examples) and the paragraphs between
# sections are left out: the page says those things in its own sections.
# Each usage line becomes a .SY block, each section of options a .SS with
# one .TP per entry, so that man fills them to any width.
cmake_minimum_required(VERSION 3.18)
foreach(v AUTOBATCH VERSION TEMPLATE OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "man.cmake: -D${v}=... is required")
  endif()
endforeach()
execute_process(COMMAND "${AUTOBATCH}" --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "autobatch --help failed (${rc})")
endif()
file(READ "${TEMPLATE}" page)

# A CMake list is split at ';' and brackets change that: the three are kept
# out of the text as @1@, @2@, @3@ (the help has no '@') until written.
string(REPLACE "\\" "\\e" help "${help}")
string(REPLACE "[" "@1@" help "${help}")
string(REPLACE "]" "@2@" help "${help}")
string(REPLACE ";" "@3@" help "${help}")
string(REPLACE "\n" ";" lines "${help}")

# roff for plain text: '-' is \- (copied from the page, an option works),
# a line may not start with '.' or "'".
function(roff_text text outvar)
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "^([.'])" "\\\\&\\1" text "${text}")
  string(REPLACE "@1@" "[" text "${text}")
  string(REPLACE "@2@" "]" text "${text}")
  string(REPLACE "@3@" ";" text "${text}")
  set(${outvar} "${text}" PARENT_SCOPE)
endfunction()

# roff for a usage line or an option's tag: options and literal words in
# bold, METAVARIABLES (any word with a capital) in italics, punctuation
# ([ ] | , ... : =) in roman.
function(roff_syntax text outvar)
  string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*|-[-a-z0-9]*|[^-A-Za-z_]+" toks "${text}")
  set(out "")
  foreach(t IN LISTS toks)
    roff_text("${t}" r)
    if(t MATCHES "^[A-Z_][A-Z0-9_]*$")
      string(APPEND out "\\fI${r}\\fR")
    elseif(t MATCHES "^[-a-z]")
      string(APPEND out "\\fB${r}\\fR")
    else()
      string(APPEND out "${r}")
    endif()
  endforeach()
  set(${outvar} "${out}" PARENT_SCOPE)
endfunction()

set(synopsis "")
set(options "")
set(state "usage")        # usage, between, section, skip
set(pending_head "")
set(entry_text "")
macro(flush_entry)
  if(NOT entry_text STREQUAL "")
    string(APPEND options "${entry_text}")
    set(entry_text "")
  endif()
endmacro()
foreach(line IN LISTS lines)
  if(state STREQUAL "usage" AND line MATCHES "^(usage: |       )autobatch(.*)$")
    set(rest "${CMAKE_MATCH_2}")
    string(STRIP "${rest}" rest)
    roff_syntax("${rest}" r)
    string(APPEND synopsis ".SY autobatch\n${r}\n.YS\n")
  elseif(line MATCHES "^([A-Z][^:]*):$")
    flush_entry()
    set(pending_head "${CMAKE_MATCH_1}")
    set(state "section")
  elseif(state STREQUAL "section" AND line MATCHES "^  (-[^ ].*)$")
    flush_entry()
    if(NOT pending_head STREQUAL "")
      roff_text("${pending_head}" head)
      string(APPEND options ".SS \"${head}\"\n")
      set(pending_head "")
    endif()
    set(entry "${CMAKE_MATCH_1}")
    set(tag "${entry}")
    set(desc "")
    if(entry MATCHES "^(.*[^ ])  +([^ ].*)$")
      # the tag ends at the first run of two spaces
      string(FIND "${entry}" "  " at)
      string(SUBSTRING "${entry}" 0 ${at} tag)
      string(SUBSTRING "${entry}" ${at} -1 desc)
      string(STRIP "${desc}" desc)
    endif()
    roff_syntax("${tag}" t)
    set(entry_text ".TP\n${t}\n")
    if(NOT desc STREQUAL "")
      roff_text("${desc}" d)
      string(APPEND entry_text "${d}\n")
    endif()
  elseif(state STREQUAL "section" AND NOT entry_text STREQUAL "" AND line MATCHES "^   +([^ ].*)$")
    roff_text("${CMAKE_MATCH_1}" d)
    string(APPEND entry_text "${d}\n")
  elseif(line STREQUAL "")
    flush_entry()
    if(state STREQUAL "usage")
      set(state "between")
    elseif(state STREQUAL "section")
      set(state "between")
    endif()
    set(pending_head "")
  else()
    # a paragraph, or a section of something else (examples): the page
    # has its own
    flush_entry()
    set(pending_head "")
    if(NOT state STREQUAL "usage")
      set(state "between")
    endif()
  endif()
endforeach()
flush_entry()
if(synopsis STREQUAL "" OR options STREQUAL "")
  message(FATAL_ERROR "man.cmake: no usage lines or no options found in autobatch --help")
endif()

string(REPLACE "@SYNOPSIS@\n" "${synopsis}" page "${page}")
string(REPLACE "@OPTIONS@\n" "${options}" page "${page}")
string(REPLACE "@VERSION@" "${VERSION}" page "${page}")
file(WRITE "${OUT}" "${page}")
