#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --slurm-targets (issue 30) on a real single-node Slurm cluster whose four
# fake GPUs are of two GRES types (tests/slurm/cluster.sh: gpu[0-1]
# "small", gpu[2-3] "big"), with a simulated capacity per partition
# (debug 16G, other 24G): one command searches debug:small and other:big
# side by side, each as its own job arrays, and finds each target's exact
# boundary on GPUs of its type; a third target, the partition that never
# schedules (never, State=DOWN), is reported PENDING within
# --slurm-pending; results per target, one matrix (printed and
# r-matrix.json), one webhook post with the matrix.  Refusals before the
# first trial; kill -9 of autobatch leaves nothing queued or running.
source "$(dirname "$0")/lib.sh"
slurm_cluster 4 targets
PY=${AB_PYTHON:-python3}

cat >"$WORK/train.sh" <<SH
#!/bin/sh
case "\$SLURM_JOB_PARTITION" in debug) cap=16G ;; *) cap=24G ;; esac
echo "\$(date +%s.%N) \$SLURM_JOB_PARTITION \${SLURM_JOB_GPUS:--}" >>"$WORK/steps.log"
exec "$SIMTRAIN" --capacity \$cap --startup-time 0.3s --step-overhead 50ms --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/train.sh"
want_small=$("$SIMTRAIN" --capacity 16G --print-max)
want_big=$("$SIMTRAIN" --capacity 24G --print-max)
[ "$want_small" != "$want_big" ] || fail "the two capacities give one boundary ($want_small)"
ours() { squeue -h -t PENDING,RUNNING,CONFIGURING,COMPLETING -o '%j' | grep -c '^autobatch' || true; }

# Refused before the first trial: one line naming the fix (and the option
# parser's pointer to --help), exit 2.
refused() { # what, expected text, autobatch args...
  local rc=0
  : >"$WORK/steps.log"
  "$AUTOBATCH" --no-cache --batch 1:8 "${@:3}" -- "$WORK/train.sh" >"$WORK/bad.out" 2>&1 || rc=$?
  assert_eq 2 "$rc" "$1: exit status ($(cat "$WORK/bad.out"))"
  grep -qF -- "$2" "$WORK/bad.out" || fail "$1: expected '$2' in: $(cat "$WORK/bad.out")"
  # (a note that a killed run's leftovers were swept, another test's
  # kill -9 running beside this one, is not part of the refusal)
  assert_eq 1 "$(grep -v -e "^try 'autobatch --help'" -e '^autobatch: removed what an earlier, killed run left' "$WORK/bad.out" | wc -l)" \
    "$1: lines of output ($(cat "$WORK/bad.out"))"
  [ ! -s "$WORK/steps.log" ] || fail "$1: a trial ran"
}
refused "two answers, one --write" "add --write-target T" --launcher slurm --slurm-targets debug,other --write
refused "--write-target elsewhere" "is not one of --slurm-targets" --launcher slurm --slurm-targets debug,other --write-target gpu
refused "--write-target alone" "give --slurm-targets" --launcher slurm --write-target debug
refused "bad target" "PARTITION or PARTITION:GRES_TYPE" --launcher slurm --slurm-targets debug:small:x
refused "target twice" "named twice" --launcher slurm --slurm-targets debug,debug
refused "locally" "from a login node" --launcher local --slurm-targets debug,other
refused "--partition too" "names each target's partition" --launcher slurm --slurm-targets debug,other --slurm-arg --partition=other
pass "refusals: one line, exit 2, no trial"

# The matrix, side by side, one post.
coproc SERVER { exec "$PY" "$AB_SOURCE_DIR/tests/webhook_server.py" "$WORK/hooks.jsonl" --time-limit 400 --exit-on-stdin-eof; }
server_pid=$SERVER_PID
read -r -u "${SERVER[0]}" PORT || fail "webhook server did not start"
trap 'kill "$server_pid" 2>/dev/null || true; stop_cluster' EXIT
: >"$WORK/steps.log"
rc=0
"$AUTOBATCH" --launcher slurm --slurm-targets debug:small,other:big,never --slurm-pending 4s \
  --no-cache --preset hf --batch 1:128 --warmup 1 --steps 3 --json "$WORK/r.json" \
  --webhook "http://127.0.0.1:$PORT/ok/matrix" -- "$WORK/train.sh" >"$WORK/m.out" 2>&1 || rc=$?
# the pending target's exit (5: out of time, nothing measured) is the run's
assert_eq 5 "$rc" "matrix: exit status ($(tail -5 "$WORK/m.out"))"
assert_eq "$want_small" "$(jqr '.max_fit[0].micro_batch' "$WORK/r-debug-small.json")" "debug:small: max micro-batch"
assert_eq "$want_big" "$(jqr '.max_fit[0].micro_batch' "$WORK/r-other-big.json")" "other:big: max micro-batch"
assert_eq "$((want_small + 1))" "$(jqr '.max_fit[0].smallest_fail' "$WORK/r-debug-small.json")" "debug:small: smallest failure"
assert_eq "debug:small" "$(jqr '.summary.slurm_target' "$WORK/r-debug-small.json")" "debug:small: summary.slurm_target"
assert_eq PartitionDown "$(jqr '.summary.slurm_pending' "$WORK/r-never.json")" "never: summary.slurm_pending"
# each target's trials on GPUs of its type only
bad_dev=$(awk '($2 == "debug" && $3 !~ /^[01]$/) || ($2 == "other" && $3 !~ /^[23]$/) { print $2, $3 }' "$WORK/steps.log")
assert_eq "" "$bad_dev" "trials on a GPU of the other type (partition, SLURM_JOB_GPUS)"
# side by side: each target's first trial started before the other's last
overlap=$(awk '{ p = $2; if (!(p in lo) || $1 < lo[p]) lo[p] = $1; if ($1 > hi[p]) hi[p] = $1 }
  END { print (lo["other"] < hi["debug"] && lo["debug"] < hi["other"]) ? "yes" : "no" }' "$WORK/steps.log")
assert_eq yes "$overlap" "the two targets' trials overlap in time"
grep -q '^\[debug:small\] autobatch: largest fit' "$WORK/m.out" || fail "no prefixed lines: $(head -5 "$WORK/m.out")"
grep -q '^| Slurm target never | never | PENDING (PartitionDown)' "$WORK/m.out" \
  || fail "matrix: no PENDING row: $(grep '^|' "$WORK/m.out")"
assert_eq 3 "$(jqr '.rows | length' "$WORK/r-matrix.json")" "r-matrix.json rows"
assert_eq "$(jqr '.best.micro_batch' "$WORK/r-other-big.json")" "$(jqr '.rows[1].best.micro_batch' "$WORK/r-matrix.json")" "r-matrix.json: other:big's choice"
assert_eq 1 "$(wc -l <"$WORK/hooks.jsonl")" "webhook posts"
assert_eq autobatch.matrix/1 "$(jq -r '.body | fromjson | .schema' "$WORK/hooks.jsonl")" "the post's schema"
assert_eq 0 "$(ours)" "jobs of ours still queued or running"
pass "debug:small $want_small and other:big $want_big side by side on GPUs of their types; never PENDING; one matrix, one post"

# kill -9 of autobatch with trials of both targets queued or running:
# each target's run gets SIGTERM (parent-death signal) and cancels its
# tasks; nothing of ours is left in any partition within 60 s.
"$AUTOBATCH" --launcher slurm --slurm-targets debug:small,other:big --no-cache --preset hf \
  --batch 1:128 --warmup 1 --steps 3 -- "$WORK/train.sh" >"$WORK/k9.out" 2>&1 &
ab=$!
trap 'kill -9 "$ab" 2>/dev/null || true; kill "$server_pid" 2>/dev/null || true; stop_cluster' EXIT
for _ in $(seq 100); do
  [ "$(squeue -h -t PENDING,RUNNING,CONFIGURING -o '%j %P' | awk '$1 ~ /^autobatch/ { print $2 }' | sort -u | wc -l)" -ge 2 ] && break
  sleep 0.2
done
[ "$(ours)" -ge 2 ] || fail "kill -9: the two targets' tasks never reached the queue: $(tail -3 "$WORK/k9.out")"
kill -9 "$ab"
t0=$SECONDS
while [ "$(ours)" -gt 0 ] || pgrep -f "simtrain-targets" >/dev/null; do
  [ $((SECONDS - t0)) -le 60 ] || fail "kill -9: still queued or running after 60 s: $(squeue -h -o '%i %j %T')"
  sleep 1
done
pass "kill -9: nothing of ours queued or running after $((SECONDS - t0)) s"
