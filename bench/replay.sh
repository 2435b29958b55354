#!/usr/bin/env bash
# Replay bench: autobatch's search with and without --replay on real CPU
# training jobs, under --trial-memory-limit (bench/README.md, "Replay bench").
#
#   bash bench/replay.sh           run every job twice (plain, then --replay)
#                                  and print the table
#   bash bench/replay.sh --save    also write the table, the commands, the
#                                  machine and the replay log lines to
#                                  bench/results/replay-cpu.txt
#
# Environment: AUTOBATCH (default build-test/autobatch, else build/autobatch),
# BENCH_JOBS (default "tts tts-ckpt orpheus parler"), BENCH_REAL_TARGET
# (default 6: the real trainers' cap is calibrated so that the boundary is
# this micro-batch, and they search --batch 1:2*TARGET).
#
# Both runs of a job get the same environment, in particular the same
# malloc settings that --replay would otherwise set in its trials on CPU,
# so that both search the same boundary.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
save=0
for a in "$@"; do
  case "$a" in
    --save) save=1 ;;
    *) echo "usage: bash bench/replay.sh [--save]" >&2; exit 2 ;;
  esac
done

ab=${AUTOBATCH:-}
if [ -z "$ab" ]; then
  for c in "$root/build-test/autobatch" "$root/build/autobatch"; do
    [ -x "$c" ] && { ab=$c; break; }
  done
fi
[ -n "$ab" ] && [ -x "$ab" ] || { echo "bench/replay.sh: no autobatch binary (set AUTOBATCH or build it)" >&2; exit 1; }
ab_src=$ab
command -v jq >/dev/null || { echo "bench/replay.sh: needs jq" >&2; exit 1; }

jobs=${BENCH_JOBS:-tts tts-ckpt orpheus parler}
target=${BENCH_REAL_TARGET:-6}

work=$(mktemp -d "${TMPDIR:-/tmp}/ab-replay-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tmp" "$work/cache"
export TMPDIR="$work/tmp" XDG_CACHE_HOME="$work/cache"
# One binary for the whole bench, even if it is rebuilt meanwhile.
ab_id="$(sha256sum < "$ab_src" | cut -c1-16), built $(date -u -r "$ab_src" '+%Y-%m-%d %H:%M:%S UTC')"
cp "$ab_src" "$work/autobatch"
ab="$work/autobatch"
ncpu=$(nproc)               # before OMP_NUM_THREADS=1, which nproc honours

# The same for every run, plain and --replay alike.
export MALLOC_MMAP_THRESHOLD_=65536 MALLOC_ARENA_MAX=1 OMP_NUM_THREADS=1 PYTHONHASHSEED=0
common=(--no-cache --steps 3 --warmup 1 --quiet)

: > "$work/jobs.tsv"      # label \t plain.json \t replay.json \t note
: > "$work/commands.txt"
: > "$work/notes.txt"
: > "$work/replay-log.txt"
note() { echo "$*" >> "$work/notes.txt"; echo "bench/replay.sh: $*" >&2; }

q() { local s="" a; for a in "$@"; do s+="$(printf '%q' "$a") "; done; echo "${s% }"; }

# run_pair LABEL DIR AB-FLAGS... -- COMMAND...   (runs in DIR)
run_pair() {
  local label=$1 dir=$2; shift 2
  local flags=() mode json err t0 rc
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  local id; id=$(echo "$label" | tr -c 'A-Za-z0-9\n' '_')
  for mode in plain replay; do
    json="$work/$id.$mode.json"; err="$work/$id.$mode.err"
    local extra=(); [ "$mode" = replay ] && extra=(--replay)
    {
      echo "[$label, $mode] (cd ${dir/#$work/\$WORK} &&"
      echo "  $(q autobatch "${extra[@]}" "${common[@]}" "${flags[@]}" --json "$mode.json" -- "$@"))"
    } >> "$work/commands.txt"
    t0=$SECONDS; rc=0
    (cd "$dir" && "$ab" "${extra[@]}" "${common[@]}" "${flags[@]}" --json "$json" -- "$@") \
      > "$work/$id.$mode.out" 2> "$err" || rc=$?
    echo "bench/replay.sh: $label, $mode: exit $rc, $((SECONDS - t0))s" >&2
    [ "$rc" = 0 ] || note "$label, $mode: autobatch exited $rc: $(tail -2 "$err" | tr '\n' ' ')"
    if [ "$mode" = replay ]; then
      grep '^autobatch: replay' "$err" | sed "s/^/[$label] /" >> "$work/replay-log.txt" || true
    fi
  done
  printf '%s\t%s\t%s\n' "$label" "$work/$id.plain.json" "$work/$id.replay.json" >> "$work/jobs.tsv"
}

skip_job() { # label why
  note "$1: not run: $2"
  printf '%s\t-\t-\n' "$1" >> "$work/jobs.tsv"
}

sys_py=/usr/bin/python3
tts_torch=$("$sys_py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)
real_py=""; real_torch=none; real_tf=none
case " $jobs " in *" orpheus "*|*" parler "*)
  real_py=$(bash "$root/tests/real/pyenv.sh" real 2>/dev/null || true)
  if [ -n "$real_py" ] && "$real_py" -c "import torch, transformers, accelerate, yaml" 2>/dev/null; then
    real_torch=$("$real_py" -c 'import torch; print(torch.__version__)')
    real_tf=$("$real_py" -c 'import transformers; print(transformers.__version__)')
  else
    real_py=""
  fi ;;
esac

# --- 1 and 2: examples/pytorch/train_tts.py on Debian's torch
tts_job() { # label ab-flags...
  local label=$1; shift
  if [ "$tts_torch" = none ]; then skip_job "$label" "$sys_py cannot import torch"; return; fi
  run_pair "$label" "$root" --trial-memory-limit 800000K "$@" -- \
    "$sys_py" examples/pytorch/train_tts.py --worst_case
}

# --- 3 and 4: the seed trainers on the cached torch 2.x environment, set
# up as tests/e2e/test_real_{orpheus,parler}.sh set them up: tiny
# synthetic data, nothing downloaded, and a cap measured from two uncapped
# direct runs (batch 1 and 2: base and growth per sample) that puts the
# boundary at $target, half a sample below the cap.
real_env() {
  export MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
         HF_HOME="$work/hf" TOKENIZERS_PARALLELISM=false WANDB_DISABLED=true WANDB_MODE=disabled
}
calibrate() { # label run_direct-function -> sets cap_kb (empty on failure)
  local p1 p2 slope
  cap_kb=""
  "$2" 1 || { note "$1: direct run at batch 1 failed"; return; }
  "$2" 2 || { note "$1: direct run at batch 2 failed"; return; }
  p1=$(jq -s '[.[].vm_peak_kb] | max' "$work/$1-direct/1/trace.jsonl")
  p2=$(jq -s '[.[].vm_peak_kb] | max' "$work/$1-direct/2/trace.jsonl")
  slope=$((p2 - p1))
  [ "$slope" -gt 20000 ] || { note "$1: memory does not grow with the batch (${p1}K, ${p2}K)"; return; }
  cap_kb=$((p1 + slope * (target - 1) + slope / 2))
  note "$1: calibration: VmPeak ${p1}K at batch 1, +${slope}K per sample; cap ${cap_kb}K, --batch 1:$((2 * target))"
}

orpheus_direct() { # batch
  local d="$work/orpheus-direct/$1"
  rm -rf "$d"; mkdir -p "$d"
  cp "$root/examples/trainers/orpheus_like/train.py" "$d/"
  sed -e "s/^batch_size: .*/batch_size: $1/" \
      -e "s/^TTS_dataset: synthetic:[0-9]*x/TTS_dataset: synthetic:$((4 * $1))x/" \
      "$root/examples/trainers/orpheus_like/config.yaml" > "$d/config.yaml"
  (cd "$d" && ORPHEUS_LIKE_TRACE="$d/trace.jsonl" exec "$real_py" train.py >log 2>&1)
}
orpheus_job() {
  local label="orpheus-like"
  if [ -z "$real_py" ]; then skip_job "$label" "no torch 2.x environment (tests/real/pyenv.sh real)"; return; fi
  (
    real_env
    calibrate orpheus orpheus_direct
    if [ -z "$cap_kb" ]; then skip_job "$label" "calibration failed"; exit 0; fi
    mkdir -p "$work/orpheus"
    cp "$root/examples/trainers/orpheus_like/train.py" "$root/examples/trainers/orpheus_like/config.yaml" "$work/orpheus/"
    run_pair "$label" "$work/orpheus" --preset orpheus --trial-memory-limit "${cap_kb}K" \
      --batch "1:$((2 * target))" --kill-grace 2s -- "$real_py" train.py
  )
}

parler_direct() { # batch
  local d="$work/parler-direct/$1"
  rm -rf "$d"; mkdir -p "$d"
  jq --arg o "$d/out" --argjson b "$1" \
    '.output_dir = $o | .overwrite_output_dir = true | .per_device_train_batch_size = $b | .max_steps = 4' \
    "$work/parler/tiny.json" > "$d/cfg.json"
  (cd "$d" && PARLER_LIKE_TRACE="$d/trace.jsonl" exec "$real_py" "$root/examples/trainers/parler_like/train.py" \
     "$d/cfg.json" >log 2>&1)
}
parler_job() {
  local label="parler-like"
  if [ -z "$real_py" ]; then skip_job "$label" "no torch 2.x environment (tests/real/pyenv.sh real)"; return; fi
  (
    real_env
    mkdir -p "$work/parler"
    jq --arg o "$work/parler/user_out" '.output_dir = $o' \
      "$root/examples/trainers/parler_like/tiny.json" > "$work/parler/tiny.json"
    calibrate parler parler_direct
    if [ -z "$cap_kb" ]; then skip_job "$label" "calibration failed"; exit 0; fi
    run_pair "$label" "$work/parler" --preset parler-tts --trial-memory-limit "${cap_kb}K" \
      --batch "1:$((2 * target))" --kill-grace 2s -- \
      "$real_py" "$root/examples/trainers/parler_like/train.py" "$work/parler/tiny.json"
  )
}

t_all=$SECONDS
for j in $jobs; do
  case "$j" in
    tts) tts_job "train_tts" --batch 1:64 ;;
    tts-ckpt) tts_job "train_tts ckpt" --batch 1:128 --checkpointing on ;;
    orpheus) orpheus_job || note "orpheus-like: the job's setup failed (exit $?)" ;;
    parler) parler_job || note "parler-like: the job's setup failed (exit $?)" ;;
    *) echo "bench/replay.sh: unknown job $j" >&2; exit 2 ;;
  esac
done
total_s=$((SECONDS - t_all))

# --- the table, from the results files only
table() {
  python3 - "$work/jobs.tsv" <<'EOF'
import json, sys

def load(p):
    if p == "-":
        return None
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

FAIL = {"oom", "timeout", "hang"}

def key(c):
    return (c.get("grad_accum"), bool(c.get("checkpointing")))

def to_boundary(r, cell):
    """Trials of the cell, in run order, until they hold a fit at B and a
    failure at B+step (or, with B at the top of --batch, a fit at B)."""
    if r is None or cell is None or cell.get("micro_batch") is None:
        return None
    b = cell["micro_batch"]
    step = r["space"]["batch"]["step"]
    top = r["space"]["batch"]["max"]
    need_fail = b + step <= top
    fit = fail = False
    n = 0
    for t in r.get("trials", []):
        if key(t) != key(cell):
            continue
        n += 1
        if t["micro_batch"] == b and t["outcome"] == "fit":
            fit = True
        if t["micro_batch"] == b + step and t["outcome"] in FAIL:
            fail = True
        if fit and (fail or not need_fail):
            return n
    return None

def fmt(v, f="{}"):
    return "-" if v is None else f.format(v)

def boundary(cell):
    if cell is None or cell.get("micro_batch") is None:
        return "-"
    return "%d/%s" % (cell["micro_batch"], fmt(cell.get("smallest_fail")))

rows = []
for line in open(sys.argv[1]):
    label, pp, rp = line.rstrip("\n").split("\t")
    p, r = load(pp), load(rp)
    cells = {}
    for res in (p, r):
        for c in (res or {}).get("max_fit", []) or []:
            cells.setdefault(key(c), None)
        for c in ((res or {}).get("replay") or {}).get("cells", []) or []:
            cells.setdefault(key(c), None)
    if not cells:
        cells[(None, None)] = None
    for k in cells:
        def find(res, sect):
            if res is None:
                return None
            lst = res.get(sect) or []
            if sect == "replay":
                lst = (res.get("replay") or {}).get("cells") or []
            for c in lst:
                if key(c) == k:
                    return c
            return None
        pc, rc, rr = find(p, "max_fit"), find(r, "max_fit"), find(r, "replay")
        cellname = "-" if k[0] is None else "%d/%s" % (k[0], "on" if k[1] else "off")
        state = "-"
        if p is None and r is None:
            state = "no results (see notes)"
        elif r is not None and r.get("replay") is None:
            state = "no replay section"
        elif rr is not None:
            state = rr.get("state") or "-"
            if rr.get("why"):
                state += ": " + rr["why"]
            if rr.get("confirmed") is not None:
                state += " (confirmed)" if rr["confirmed"] else " (not confirmed)"
        def tot(res, f, fs="{}"):
            return fmt(None if res is None else res.get("summary", {}).get(f), fs)
        rows.append([
            label, cellname, boundary(pc), boundary(rc),
            fmt(rr and rr.get("first_prediction")),
            fmt(rr and rr.get("error_steps"), "{:+d}"),
            fmt(rr and rr.get("need_error_pct"), "{:+.2f}"),
            fmt(to_boundary(p, pc)), fmt(to_boundary(r, rc)),
            "%s/%s" % (tot(p, "trials"), tot(r, "trials")),
            "%s/%s" % (tot(p, "wall_s", "{:.0f}"), tot(r, "wall_s", "{:.0f}")),
            state,
        ])

head = ["job", "cell", "plain", "replay", "P", "err", "need err %",
        "to bnd plain", "to bnd replay", "trials p/r", "wall s p/r", "replay state"]
w = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
def out(r):
    print("  ".join(str(v).ljust(w[i]) for i, v in enumerate(r)).rstrip())
out(head)
out(["-" * n for n in w])
for r in rows:
    out(r)
EOF
}

trials_list() {
  local label pp rp
  while IFS=$'\t' read -r label pp rp; do
    for f in "$pp" "$rp"; do
      [ -f "$f" ] || continue
      printf '  %-15s %-7s %s\n' "$label" "$(basename "$f" .json | sed 's/.*\.//')" \
        "$(jq -r '[.trials[] | "\(.micro_batch):\(.outcome)\(if .recorded == true then "R" else "" end)\(if .checkpointing then "c" else "" end)"] | join(" ")' "$f")"
    done
  done < "$work/jobs.tsv"
}

legend() {
  cat <<'EOF'
cell: grad_accum/checkpointing. plain, replay: the boundary each run found,
largest fit/smallest failure ("-": none, e.g. the top of --batch fitted).
P: replay's first prediction of the largest fit (first_prediction); err: the
prediction's error in grid steps (error_steps); need err %: the model's
predicted peak need vs the measured one (need_error_pct), at the prediction
if it fitted, else at the fitting neighbour that settled it (need_at). to bnd:
that cell's trials, in run order, until they hold a fit at the final
largest fit B and a failure (oom/timeout/hang) at B+step, or a fit at B when
B is the top of --batch; replay's count includes its recording trials.
trials, wall s: the whole run (summary.trials, summary.wall_s). "-": not
measured.
EOF
}

{
  table
  echo
  legend
  if [ -s "$work/notes.txt" ]; then echo; echo "notes:"; sed 's/^/  /' "$work/notes.txt"; fi
} > "$work/table.txt"
cat "$work/table.txt"

if [ "$save" = 1 ]; then
  out="$root/bench/results/replay-cpu.txt"
  mkdir -p "$root/bench/results"
  {
    echo "autobatch --replay vs plain search, CPU, under --trial-memory-limit (bash bench/replay.sh --save)"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "machine: $ncpu CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -sr)"
    echo "torch: $tts_torch ($sys_py, jobs train_tts*); $real_torch, transformers $real_tf (${real_py:-none}, jobs orpheus-like, parler-like)"
    echo "environment of every run: MALLOC_MMAP_THRESHOLD_=65536 MALLOC_ARENA_MAX=1 OMP_NUM_THREADS=1 PYTHONHASHSEED=0"
    echo "  (orpheus-like, parler-like also MKL_NUM_THREADS=1 and HF offline, as tests/e2e/test_real_*.sh)"
    echo "bench wall time: ${total_s}s"
    echo
    cat "$work/table.txt"
    echo
    echo "replay log (autobatch stderr, --replay runs):"
    sed 's/^/  /' "$work/replay-log.txt"
    echo
    echo "trials in run order (micro-batch:outcome, R = recording trial, c = checkpointing on):"
    trials_list
    echo
    echo "commands (autobatch = $ab_src, sha256 $ab_id; \$WORK = a temporary directory, removed at the end):"
    sed -e "s|$work|\$WORK|g" -e 's/^/  /' "$work/commands.txt"
  } > "$out.tmp"
  mv "$out.tmp" "$out"
  echo "wrote $out" >&2
fi
