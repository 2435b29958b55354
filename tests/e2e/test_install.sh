#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `cmake --install` into a prefix gives a working autobatch: --version with
# the revision and the libraries, the man page and the bash and zsh
# completions generated from --help (the GPU options included), the
# emulation library where the installed binary finds it, the license.
source "$(dirname "$0")/lib.sh"
build=$(dirname "$AUTOBATCH")
prefix="$WORK/prefix"
cmake --install "$build" --prefix "$prefix" >"$WORK/install.out" 2>&1 \
  || fail "cmake --install: $(tail -3 "$WORK/install.out")"
ab="$prefix/bin/autobatch"
[ -x "$ab" ] || fail "no bin/autobatch in the prefix"
"$ab" --version >"$WORK/version" || fail "--version exited $?"
grep -Eq '^autobatch [0-9]+\.[0-9]+\.[0-9]+ \(.+\)$' "$WORK/version" || fail "--version: $(cat "$WORK/version")"
grep -q "^libyaml [0-9.]*, jansson [0-9.]*" "$WORK/version" || fail "--version libraries: $(cat "$WORK/version")"
pass "--version: $(head -1 "$WORK/version")"

man="$prefix/share/man/man1/autobatch.1"
[ -s "$man" ] || fail "no man page"
head -1 "$man" | grep -q '^\.TH AUTOBATCH 1' || fail "man page header: $(head -1 "$man")"
for o in emulate-gpu-memory gpus-per-trial launcher checkpointing; do
  grep -qF -- "$(printf -- '--%s' "$o" | sed 's/-/\\-/g')" "$man" || fail "man page lacks --$o"
done
grep -q '^\.SS "GPUs and clusters"' "$man" || fail "man page lacks the GPU section"
if command -v groff >/dev/null; then
  groff -man -Tutf8 -ww -z "$man" 2>"$WORK/groff.err"
  [ ! -s "$WORK/groff.err" ] || fail "groff: $(head -3 "$WORK/groff.err")"
fi
pass "man page: $(grep -c '^\.SH' "$man") sections, every option of --help"

bashc="$prefix/share/bash-completion/completions/autobatch"
[ -s "$bashc" ] || fail "no bash completion"
got=$(bash -c 'source "$1"; COMP_WORDS=(autobatch --emul); COMP_CWORD=1; _autobatch; echo "${COMPREPLY[*]}"' _ "$bashc")
assert_eq "--emulate-gpu-memory --emulate-with" "$got" "bash: completing --emul"
got=$(bash -c 'source "$1"; COMP_WORDS=(autobatch --checkpointing ""); COMP_CWORD=2; _autobatch; echo "${COMPREPLY[*]}"' _ "$bashc")
assert_eq "off on both" "$got" "bash: values of --checkpointing"
got=$(bash -c 'source "$1"; COMP_WORDS=(autobatch ma); COMP_CWORD=1; _autobatch; echo "${COMPREPLY[*]}"' _ "$bashc")
assert_eq "matrix" "$got" "bash: a subcommand"
zshc="$prefix/share/zsh/site-functions/_autobatch"
# values that depend on the subcommand, the webhook formats, units
comp() { bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _autobatch; echo "${COMPREPLY[*]}"' _ "$bashc" "$@"; }
assert_eq "markdown json" "$(comp autobatch matrix r.json --format "")" "bash: matrix --format"
assert_eq "markdown html junit" "$(comp autobatch report r.json --format "")" "bash: report --format"
assert_eq "generic slack discord teams" "$(comp autobatch --webhook-format "")" "bash: --webhook-format"
assert_eq "10s 10m 10h" "$(comp autobatch --budget 10)" "bash: a duration's units"
assert_eq "24M 24G 24T" "$(comp autobatch --emulate-gpu-memory 24)" "bash: a size's units"
head -1 "$zshc" | grep -q '^#compdef autobatch' || fail "zsh completion header"
grep -q "'--launcher:value:(local slurm)'" "$zshc" || fail "zsh: --launcher's values"
pass "completions: bash (options, values per subcommand, units, subcommands) and zsh"

lib=$(find "$prefix" -name libautobatch-gpuemu.so)
[ -n "$lib" ] || fail "no emulation library in the prefix"
cat >"$WORK/train.sh" <<SH
#!/bin/sh
echo "\$LD_PRELOAD" >>"$WORK/preload.log"
exec "$SIMTRAIN" --capacity 24G --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/train.sh"
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
AUTOBATCH_NVML_LIB=$FAKE_NVML_LIB FAKE_NVML_TOTAL=24G "$ab" --quiet --no-cache --batch 1:64 --steps 3 \
  --emulate-gpu-memory 12G -- "$WORK/train.sh" >"$WORK/emu.out" 2>&1 || fail "emulated run: $(tail -3 "$WORK/emu.out")"
got=$(realpath "$(head -1 "$WORK/preload.log" | cut -d: -f1)")
assert_eq "$(realpath "$lib")" "$got" "the library the installed binary preloads"
pass "emulation: the installed autobatch preloads $lib"
[ -s "$prefix/share/doc/autobatch/LICENSE" ] || fail "no LICENSE in the doc directory"
pass "LICENSE, README.md and CHANGELOG.md in share/doc/autobatch"
# A run without a webhook does not pay for libcurl or libcrypto: both are
# loaded with dlopen when a webhook is sent, not linked.
needed=$(readelf -d "$ab" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case "$needed" in *libcurl*|*libcrypto*|*libssl*) fail "linked at start-up: $needed";; esac
pass "not linked: libcurl, libcrypto ($needed)"
