# SPDX-License-Identifier: MIT
# Shared helpers for the end-to-end tests (sourced, not run).
# ctest sets AUTOBATCH, SIMTRAIN and AB_SOURCE_DIR.
set -euo pipefail
: "${AUTOBATCH:?set by ctest}" "${SIMTRAIN:?set by ctest}"
WORK=$(mktemp -d /tmp/ab-e2e-XXXXXX)
# Every process a test starts carries this mark in its environment, so
# leftovers can be found in /proc without guessing at names.
export AB_E2E_MARK="ab-e2e-$$-$RANDOM"
# A cache of our own: a warm start from an earlier run would change trial counts.
export XDG_CACHE_HOME="$WORK/cache" XDG_STATE_HOME="$WORK/state"
trap '[ -n "${AB_KEEP:-}" ] || rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
# Nothing to test in this build (ctest shows it as skipped, not passed).
skip() { echo "skip: $*"; exit 77; }

assert_eq() { # want got what
  [ "$1" = "$2" ] || fail "$3: expected '$1', got '$2'"
}

# Processes (other than this shell and its ancestors) carrying our mark.
marked_procs() {
  local p me=$$ out=""
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = "$me" ] && continue
    [ "$p" = "$BASHPID" ] && continue
    if { tr '\0' '\n' < /proc/$p/environ; } 2>/dev/null | grep -qx "AB_E2E_MARK=$AB_E2E_MARK"; then
      # our own test shell's subshells are not leftovers
      case "$(cat /proc/$p/comm 2>/dev/null)" in bash|tr|grep|cat) continue ;; esac
      out="$out $p"
    fi
  done
  echo "$out"
}

# assert_refused WHAT TEXT TRIAL_LOG ARGS...: `autobatch ARGS` exits 2
# with TEXT in its output, and TRIAL_LOG (which every trial of the test's
# command appends to) stays empty: bad input refused before any trial.
assert_refused() {
  local what=$1 text=$2 log=$3 rc=0
  shift 3
  : >"$log"
  "$AUTOBATCH" "$@" >"$WORK/refused.out" 2>&1 || rc=$?
  assert_eq 2 "$rc" "$what: exit status"
  grep -q -- "$text" "$WORK/refused.out" || fail "$what: '$text' not in: $(cat "$WORK/refused.out")"
  [ ! -s "$log" ] || fail "$what: a trial ran"
}

assert_no_leftovers() {
  local left
  left=$(marked_procs)
  [ -z "$left" ] || { ps -o pid,ppid,stat,cmd -p ${left// /,} >&2 || true; fail "processes left behind:$left"; }
}

# jq on the results file
jqr() { jq -r "$1" "$2"; }

# The choice is the fastest fit: no configuration is more than 1% faster
# (a configuration measured again counts with the mean of its runs, as
# autobatch pools them).  assert_best_is_fastest FILE WHAT
assert_best_is_fastest() {
  jq -e --argjson best "$(jq -c '.best' "$1")" '
    [.trials[] | select(.outcome == "fit" and .samples_per_s != null)]
    | group_by([.micro_batch, .grad_accum, .checkpointing])
    | map({k: [.[0].micro_batch, .[0].grad_accum, .[0].checkpointing],
           v: (map(.samples_per_s) | add / length)}) as $c
    | ($c | map(.v) | max) as $m
    | ($c[] | select(.k == [$best.micro_batch, $best.grad_accum, $best.checkpointing]) | .v)
      * 1.01 >= $m' "$1" >/dev/null || fail "$2: best is not the fastest fit"
}

# slurm_cluster NODES NAME: a private Slurm cluster of NODES fake-GPU nodes
# for this test (root only: skips otherwise), stopped and removed on exit,
# its variables in this shell; SIMTRAIN becomes a copy named
# simtrain-NAME, so that "still running" checks see only this test's.
slurm_cluster() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to run slurmd"
  cluster="$AB_SOURCE_DIR/tests/slurm/cluster.sh"
  bash "$cluster" install >/dev/null 2>&1 || fail "cannot install slurm (tests/slurm/cluster.sh install)"
  dir=$(mktemp -d "/tmp/ab-$2-XXXXXX")
  stop_cluster() { bash "$cluster" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir" "$WORK"; }
  trap stop_cluster EXIT
  eval "$(bash "$cluster" start "$dir" "$1")"
  cp "$SIMTRAIN" "$WORK/simtrain-$2"
  SIMTRAIN=$WORK/simtrain-$2
}

# on_pty OUT CMD...: run CMD with stdin, stdout and stderr on a terminal
# PTY_COLS (100) columns wide, everything it wrote to OUT; returns CMD's
# status.  script(1) where it exists, else Python's pty module.
on_pty() {
  local out=$1 q="" a cols=${PTY_COLS:-100}
  shift
  for a in "$@"; do q+=" $(printf '%q' "$a")"; done
  if command -v script >/dev/null; then
    TERM=xterm COLUMNS=$cols script -qfec "stty cols $cols 2>/dev/null;$q" /dev/null </dev/null >"$out"
  else
    TERM=xterm COLUMNS=$cols python3 -c '
import os, pty, sys
out = open(sys.argv[1], "wb")
def read(fd):
    data = os.read(fd, 65536)
    out.write(data)
    return data
sys.exit(os.waitstatus_to_exitcode(pty.spawn(["sh", "-c", sys.argv[2]], read)))' \
      "$out" "stty cols $cols 2>/dev/null;$q" </dev/null
  fi
}

# doc_blocks FILE...: run the ```console blocks of the Markdown FILEs (paths
# relative to AB_SOURCE_DIR) as tests/e2e/readme_blocks.py does, in a
# scratch directory where build/ holds this build's autobatch and simtrain
# (what `bash examples/demo.sh` leaves), and check that every other command
# block says why it is not run; AB_README_UPDATE=1 rewrites the blocks'
# output from the run instead.  Returns readme_blocks.py's status.
doc_blocks() {
  local mode=check
  [ -n "${AB_README_UPDATE:-}" ] && mode=update
  mkdir -p "$WORK/build"
  ln -sfn "$AUTOBATCH" "$WORK/build/autobatch"
  ln -sfn "$SIMTRAIN" "$WORK/build/simtrain"
  ln -sfn "$AB_SOURCE_DIR/examples" "$WORK/examples"
  ln -sfn "$AB_SOURCE_DIR/configs" "$WORK/configs"
  (cd "$AB_SOURCE_DIR" && python3 tests/e2e/readme_blocks.py "$mode" "$WORK" "$@")
}
