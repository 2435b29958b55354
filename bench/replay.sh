#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Replay bench: autobatch's search with and without --replay on real CPU
# training jobs, under --trial-memory-limit (bench/README.md, "Replay bench").
#
#   bash bench/replay.sh           run every job plain and with --replay,
#                                  interleaved, and print the table
#   bash bench/replay.sh --save    also write the table, the commands, the
#                                  machine and the replay log lines to
#                                  bench/results/replay-cpu-<commit>.txt
#   bash bench/replay.sh --jobs f5,coqui --repeats 3
#                                  only these jobs (names as in BENCH_JOBS)
#
# Each job runs --repeats (BENCH_REPEATS, default 3) pairs: plain and
# --replay one after the other, the order swapped each repeat (plain first
# in odd repeats), so that a burst of load on this shared machine falls on
# both alike.  The table gives, per job and mode, the min and median of the
# whole run's wall time (measured around autobatch) and of the trials' time
# to the exact boundary (their wall_s summed, in run order, until they hold
# it), the trials, and the process start-ups (trials and confirmation runs)
# x the job's start-up S (train_tts jobs: a run of train_tts.py timed from
# its start to "Running training"): what the start-ups cost again on a GPU.
# The header names the commit (-dirty when tracked files differ), the
# build type and the load at the start and the end.
#
# Environment: AUTOBATCH (default build-test/autobatch, else build/autobatch;
# use a Release build for timings),
# BENCH_JOBS (default "tts tts-ckpt orpheus parler f5 coqui"; --jobs wins),
# BENCH_KEEP_WORK (set: keep the temporary directory, with every run's
# output and results file), BENCH_REAL_TARGET (default 6: the real
# trainers' cap is calibrated so that the boundary is this micro-batch, and
# they search --batch 1:2*TARGET; F5, whose batch is in mel frames, 200 a
# clip, searches 200:2*TARGET*200:200).
#
# Both runs of a job get the same environment, in particular the same
# malloc settings that --replay would otherwise set in its trials on CPU,
# so that both search the same boundary.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
save=0
jobs=${BENCH_JOBS:-tts tts-ckpt orpheus parler f5 coqui}
repeats=${BENCH_REPEATS:-3}
usage() { echo "usage: bash bench/replay.sh [--save] [--jobs JOB,JOB...] [--repeats N]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --save) save=1 ;;
    --repeats) [ $# -ge 2 ] || usage; repeats=$2; shift ;;
    --jobs) [ $# -ge 2 ] || usage; jobs=${2//,/ }; shift ;;
    --jobs=*) jobs=${1#--jobs=}; jobs=${jobs//,/ } ;;
    *) usage ;;
  esac
  shift
done
for j in $jobs; do
  case "$j" in
    tts|tts-ckpt|orpheus|parler|f5|coqui) ;;
    *) echo "bench/replay.sh: unknown job $j (tts tts-ckpt orpheus parler f5 coqui)" >&2; exit 2 ;;
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
[ "$repeats" -ge 1 ] 2>/dev/null || { echo "bench/replay.sh: --repeats wants a number >= 1" >&2; exit 2; }
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$(dirname "$ab_src")/CMakeCache.txt" 2>/dev/null || true)
build_type=${build_type:-unknown (no CMakeCache.txt beside $ab_src)}
commit=$(git -C "$root" rev-parse --short HEAD)
[ -z "$(git -C "$root" status --porcelain -uno 2>/dev/null)" ] || commit="$commit-dirty"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
command -v jq >/dev/null || { echo "bench/replay.sh: needs jq" >&2; exit 1; }

target=${BENCH_REAL_TARGET:-6}

work=$(mktemp -d "${TMPDIR:-/tmp}/ab-replay-bench-XXXXXX")
if [ -n "${BENCH_KEEP_WORK:-}" ]; then
  echo "bench/replay.sh: keeping $work (BENCH_KEEP_WORK)" >&2
else
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/tmp" "$work/cache"
export TMPDIR="$work/tmp" XDG_CACHE_HOME="$work/cache"
# One binary for the whole bench, even if it is rebuilt meanwhile.
ab_id="$(sha256sum < "$ab_src" | cut -c1-16), built $(date -u -r "$ab_src" '+%Y-%m-%d %H:%M:%S UTC')"
cp "$ab_src" "$work/autobatch"
ab="$work/autobatch"
ncpu=$(getconf _NPROCESSORS_ONLN)   # not nproc: it obeys OMP_NUM_THREADS

# The same for every run, plain and --replay alike.
export MALLOC_MMAP_THRESHOLD_=65536 MALLOC_ARENA_MAX=1 OMP_NUM_THREADS=1 PYTHONHASHSEED=0
common=(--no-cache --steps 3 --warmup 1 --quiet)

: > "$work/jobs.tsv"      # label \t plain.json \t replay.json \t rep \t plain wall s \t replay wall s \t S
: > "$work/commands.txt"
: > "$work/notes.txt"
: > "$work/replay-log.txt"
note() { echo "$*" >> "$work/notes.txt"; echo "bench/replay.sh: $*" >&2; }

q() { local s="" a; for a in "$@"; do s+="$(printf '%q' "$a") "; done; echo "${s% }"; }

# run_pair LABEL DIR AB-FLAGS... -- COMMAND...   (runs in DIR; $startup_s, if set, is the job's S)
run_pair() {
  local label=$1 dir=$2; shift 2
  local flags=() mode json err t0 t1 rc r
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  local id; id=$(echo "$label" | tr -c 'A-Za-z0-9\n' '_')
  for ((r = 1; r <= repeats; r++)); do
    local modes=(plain replay) wall_plain=- wall_replay=-
    [ $((r % 2)) = 1 ] || modes=(replay plain)
    for mode in "${modes[@]}"; do
      json="$work/$id.$mode.$r.json"; err="$work/$id.$mode.$r.err"
      local extra=(); [ "$mode" = replay ] && extra=(--replay)
      [ "$r" != 1 ] || {
        echo "[$label, $mode] (cd ${dir/#$work/\$WORK} &&"
        echo "  $(q autobatch "${extra[@]}" "${common[@]}" "${flags[@]}" --json "$mode.json" -- "$@"))"
      } >> "$work/commands.txt"
      t0=$(date +%s.%N); rc=0
      (cd "$dir" && "$ab" "${extra[@]}" "${common[@]}" "${flags[@]}" --json "$json" -- "$@") \
        > "$work/$id.$mode.$r.out" 2> "$err" || rc=$?
      t1=$(date +%s.%N)
      local w; w=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
      if [ "$mode" = plain ]; then wall_plain=$w; else wall_replay=$w; fi
      echo "bench/replay.sh: $label, repeat $r, $mode: exit $rc, ${w}s" >&2
      [ "$rc" = 0 ] || note "$label, repeat $r, $mode: autobatch exited $rc: $(tail -2 "$err" | tr '\n' ' ')"
      if [ "$mode" = replay ]; then
        grep '^autobatch: replay' "$err" | sed "s/^/[$label, repeat $r] /" >> "$work/replay-log.txt" || true
      fi
    done
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$work/$id.plain.$r.json" "$work/$id.replay.$r.json" "$r" \
      "$wall_plain" "$wall_replay" "${startup_s:--}" >> "$work/jobs.tsv"
  done
}

skip_job() { # label why
  note "$1: not run: $2"
  printf '%s\t-\t-\t-\t-\t-\t-\n' "$1" >> "$work/jobs.tsv"
}

sys_py=/usr/bin/python3
tts_torch=$("$sys_py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)
real_py=""; real_torch=none; real_tf=none; f5_ver=none; coqui_ver=none
case " $jobs " in *" orpheus "*|*" parler "*|*" f5 "*|*" coqui "*)
  real_py=$(bash "$root/tests/real/pyenv.sh" real 2>/dev/null || true)
  if [ -n "$real_py" ] && "$real_py" -c "import torch, transformers, accelerate, yaml" 2>/dev/null; then
    real_torch=$("$real_py" -c 'import torch; print(torch.__version__)')
    real_tf=$("$real_py" -c 'import transformers; print(transformers.__version__)')
    f5_ver=$("$real_py" -c 'import importlib.metadata as m, f5_tts; print(m.version("f5-tts"))' 2>/dev/null || echo none)
    coqui_ver=$("$real_py" -c 'import importlib.metadata as m, TTS; print(m.version("coqui-tts"))' 2>/dev/null || echo none)
  else
    real_py=""
  fi ;;
esac

# --- 1 and 2: examples/pytorch/train_tts.py on Debian's torch
tts_startup() { # S of train_tts.py: from its start to "Running training", once
  [ -z "${tts_s:-}" ] || return 0
  python3 "$root/bench/real_anchors/tsrun.py" "$work/tts-startup.log" -- \
    "$sys_py" "$root/examples/pytorch/train_tts.py" --worst_case --max_steps 1 --per_device_train_batch_size 2 \
    > /dev/null 2>&1 || true
  tts_s=$(awk -F'\t' '/Running training/ { print $1; exit }' "$work/tts-startup.log")
  note "train_tts.py start-up S (start to 'Running training', $sys_py): ${tts_s:-not measured} s"
}
tts_job() { # label ab-flags...
  local label=$1; shift
  if [ "$tts_torch" = none ]; then skip_job "$label" "$sys_py cannot import torch"; return; fi
  tts_startup
  startup_s=$tts_s run_pair "$label" "$root" --trial-memory-limit 800000K "$@" -- \
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
# The direct run at batch B leaves its peak in $work/LABEL-direct/B/: the
# trainer's own trace.jsonl (orpheus, parler), else a file vmpeak in kB
# (tests/real/direct_steps.py's VmPeak after 4 optimizer steps: f5, coqui).
direct_peak() { # label batch
  local d="$work/$1-direct/$2"
  if [ -f "$d/trace.jsonl" ]; then jq -s '[.[].vm_peak_kb] | max' "$d/trace.jsonl"; else cat "$d/vmpeak"; fi
}
# direct_steps OUT DIR ARGS...: run the trainer (python ARGS) in DIR under
# tests/real/direct_steps.py for 4 optimizer steps; OUT/log, OUT/vmpeak (kB).
direct_steps() {
  local out=$1 dir=$2; shift 2
  (cd "$dir" && AB_DIRECT_STEPS=4 exec "$real_py" "$root/tests/real/direct_steps.py" "$@" \
     >"$out/log" 2>&1) || return 1
  sed -n 's/^direct_steps: VmPeak:[[:space:]]*\([0-9]*\) kB$/\1/p' "$out/log" > "$out/vmpeak"
}
calibrate() { # label run_direct-function [B1 B2 MIN_SLOPE_KB UNIT BATCH_FLAG] -> sets cap_kb (empty on failure)
  local b1=${3:-1} b2=${4:-2} min=${5:-20000} unit=${6:-sample} bflag=${7:-1:$((2 * target))}
  local p1 p2 slope
  cap_kb=""
  "$2" "$b1" || { note "$1: direct run at batch $b1 failed"; return; }
  "$2" "$b2" || { note "$1: direct run at batch $b2 failed"; return; }
  p1=$(direct_peak "$1" "$b1")
  p2=$(direct_peak "$1" "$b2")
  [ -n "$p1" ] && [ -n "$p2" ] || { note "$1: a direct run printed no VmPeak"; return; }
  slope=$(((p2 - p1) / (b2 - b1)))
  [ "$slope" -gt "$min" ] || { note "$1: memory does not grow with the batch (${p1}K at $b1, ${p2}K at $b2)"; return; }
  cap_kb=$((p1 + slope * (target - b1) + slope / 2))
  note "$1: calibration: VmPeak ${p1}K at batch $b1, +${slope}K per $unit; cap ${cap_kb}K, --batch $bflag"
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

# --- 5 and 6: the real seed trainers, PyPI f5-tts (its own Hydra train.py,
# a tiny DiT) and coqui-tts (TTS.bin.train_tts, a small GlowTTS), set up as
# tests/e2e/test_real_{f5,coqui}.sh set them up: tiny synthetic data of
# equal-length clips (tests/real/{f5,coqui}/make_data.py), the tests'
# configs, and a cap from two uncapped direct runs under
# tests/real/direct_steps.py (VmPeak after 4 optimizer steps; the tests'
# batch sizes) that puts the boundary at $target clips, half a clip below
# the cap.  F5's batch is in mel frames (batch_size_type: frame): every
# clip is 200 frames, so k*200 frames is a batch of k clips.
f5_direct() { # clips
  local d="$work/f5-direct/$1"
  rm -rf "$d"; mkdir -p "$d"
  # F5 joins ckpts.save_dir onto the checkout: climb out of it, as the test does
  direct_steps "$d" "$work/f5/F5-TTS" \
    src/f5_tts/train/train.py --config-name F5TTS_tiny datasets.batch_size_per_gpu="$(($1 * 200))" \
    ckpts.save_dir="$(printf '../%.0s' {1..64})${d#/}/out" hydra.run.dir="$d/out/hydra"
}
f5_job() {
  local label="f5-tts"
  if [ -z "$real_py" ] || [ "$f5_ver" = none ]; then
    skip_job "$label" "no torch 2.x environment with f5_tts (tests/real/pyenv.sh real)"; return
  fi
  (
    real_env
    local top="$work/f5/F5-TTS" pkg
    pkg=$("$real_py" -c 'import f5_tts; print(list(f5_tts.__path__)[0])')
    mkdir -p "$top/src"
    cp -r "$pkg" "$top/src/f5_tts"
    find "$top/src" -name __pycache__ -prune -exec rm -rf {} +
    export PYTHONPATH="$top/src"
    "$real_py" "$root/tests/real/f5/make_data.py" "$top" tiny --clips 64 --frames 200 >/dev/null 2>&1 \
      || { skip_job "$label" "tests/real/f5/make_data.py failed"; exit 0; }
    cp "$root/tests/real/f5/F5TTS_tiny.yaml" "$top/src/f5_tts/configs/F5TTS_tiny.yaml"
    note "f5: the batch is in mel frames, 200 a clip: the direct runs' batch 4 and 12 are 800 and 2400 frames"
    calibrate f5 f5_direct 4 12 4000 clip "200:$((2 * target * 200)):200"
    if [ -z "$cap_kb" ]; then skip_job "$label" "calibration failed"; exit 0; fi
    run_pair "$label" "$top" --preset f5-tts --config src/f5_tts/configs/F5TTS_tiny.yaml \
      --trial-memory-limit "${cap_kb}K" --batch "200:$((2 * target * 200)):200" --kill-grace 2s -- \
      "$real_py" src/f5_tts/train/train.py --config-name F5TTS_tiny
  )
}

coqui_direct() { # batch
  local d="$work/coqui-direct/$1"
  rm -rf "$d"; mkdir -p "$d"
  sed -e "s|$work/coqui/project/runs|$d/runs|" "$work/coqui/project/config.json" > "$d/config.json"
  direct_steps "$d" "$d" -m TTS.bin.train_tts --config_path "$d/config.json" --coqpit.batch_size "$1"
}
coqui_job() {
  local label="coqui-tts"
  if [ -z "$real_py" ] || [ "$coqui_ver" = none ]; then
    skip_job "$label" "no torch 2.x environment with TTS (tests/real/pyenv.sh real)"; return
  fi
  (
    real_env
    export MPLBACKEND=Agg
    mkdir -p "$work/coqui/project"
    python3 "$root/tests/real/coqui/make_data.py" "$work/coqui/data" --clips 64 --seconds 10 >/dev/null \
      || { skip_job "$label" "tests/real/coqui/make_data.py failed"; exit 0; }
    sed -e "s|@OUT@|$work/coqui/project/runs|" -e "s|@DATA@|$work/coqui/data|" \
      "$root/tests/real/coqui/config.template.json" > "$work/coqui/project/config.json"
    calibrate coqui coqui_direct 4 6 8000
    if [ -z "$cap_kb" ]; then skip_job "$label" "calibration failed"; exit 0; fi
    run_pair "$label" "$work/coqui/project" --preset coqui --trial-memory-limit "${cap_kb}K" \
      --batch "1:$((2 * target))" --kill-grace 2s -- \
      "$real_py" -m TTS.bin.train_tts --config_path config.json
  )
}

t_all=$SECONDS
for j in $jobs; do
  case "$j" in
    tts) tts_job "train_tts" --batch 1:64 ;;
    tts-ckpt) tts_job "train_tts ckpt" --batch 1:128 --checkpointing on ;;
    orpheus) orpheus_job || note "orpheus-like: the job's setup failed (exit $?)" ;;
    parler) parler_job || note "parler-like: the job's setup failed (exit $?)" ;;
    f5) f5_job || note "f5-tts: the job's setup failed (exit $?)" ;;
    coqui) coqui_job || note "coqui-tts: the job's setup failed (exit $?)" ;;
    *) echo "bench/replay.sh: unknown job $j" >&2; exit 2 ;;
  esac
done
total_s=$((SECONDS - t_all))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the table, from the results files only
table() {
  python3 - "$work/jobs.tsv" <<'EOF'
import json, statistics, sys

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
    """(trials, seconds) of the cell, in run order (confirmation runs
    included), until they hold a fit at B and a failure at B+step (or, with
    B at the top of --batch, a fit at B); seconds: their wall_s summed."""
    if r is None or cell is None or cell.get("micro_batch") is None:
        return None, None
    b = cell["micro_batch"]
    step = r["space"]["batch"]["step"]
    top = r["space"]["batch"]["max"]
    need_fail = b + step <= top
    fit = fail = False
    n, s = 0, 0.0
    # confirmation runs count too: they are trials with their own ids, and
    # one that fails at B+step can be what settles the boundary
    runs = sorted(list(r.get("trials", [])) + list(r.get("confirm") or []), key=lambda t: t.get("id", 0))
    for t in runs:
        if key(t) != key(cell):
            continue
        n += 1
        s += t.get("wall_s") or 0
        if t["micro_batch"] == b and t["outcome"] == "fit":
            fit = True
        if t["micro_batch"] == b + step and t["outcome"] in FAIL:
            fail = True
        if fit and (fail or not need_fail):
            return n, s
    return None, None

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

def mn(xs):
    xs = [x for x in xs if x is not None]
    return min(xs) if xs else None

def f0(v):
    return "-" if v is None else "%.0f" % v

def num(x):
    try:
        return float(x)
    except ValueError:
        return None

def boundary(cell):
    if cell is None or cell.get("micro_batch") is None:
        return "-"
    return "%d/%s" % (cell["micro_batch"], "-" if cell.get("smallest_fail") is None else cell["smallest_fail"])

def find(res, sect, k):
    if res is None:
        return None
    lst = res.get(sect) or []
    if sect == "replay":
        lst = (res.get("replay") or {}).get("cells") or []
    for c in lst:
        if key(c) == k:
            return c
    return None

def uniq(xs):
    return "/".join(dict.fromkeys(str(x) for x in xs))

jobs = {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    jobs.setdefault(f[0], []).append(f)

print("| job | cell | mode | runs | boundary (largest fit/first failure) | replay's prediction | trials to the exact boundary | s to the boundary, min / median | whole run trials | whole s, min / median | start-ups x S s (median) | replay state |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
differ = []
for label, reps in jobs.items():
    runs = [(load(f[1]), load(f[2]), f) for f in reps]
    cells = {}
    for p, r, _ in runs:
        for res in (p, r):
            for c in (res or {}).get("max_fit", []) or []:
                cells.setdefault(key(c), None)
            for c in ((res or {}).get("replay") or {}).get("cells", []) or []:
                cells.setdefault(key(c), None)
    if not cells:
        print("| %s | - | - | 0 | - | - | - | - | - | - | - | no results (see notes) |" % label)
        continue
    for k in cells:
        cellname = "-" if k[0] is None else "%d/%s" % (k[0], "on" if k[1] else "off")
        for mode, idx, widx in (("plain", 0, 4), ("replay", 1, 5)):
            bnds, preds, tb, sb, tot, walls, su, states = [], [], [], [], [], [], [], []
            for run in runs:
                res, f = run[idx], run[2]
                cell = find(res, "max_fit", k)
                bnds.append(boundary(cell))
                n, s = to_boundary(res, cell)
                tb.append(n); sb.append(s)
                tot.append(None if res is None else res.get("summary", {}).get("trials"))
                walls.append(num(f[widx]) if len(f) > widx else None)
                S = num(f[6]) if len(f) > 6 else None
                if res is not None and S is not None:
                    su.append((len(res.get("trials") or []) + len(res.get("confirm") or [])) * S)
                if mode == "replay":
                    rr = find(res, "replay", k)
                    preds.append("-" if rr is None or rr.get("first_prediction") is None else rr["first_prediction"])
                    st = "-" if rr is None else (rr.get("state") or "-")
                    if rr is not None and rr.get("why"):
                        st += ": " + rr["why"]
                    states.append(st)
            print("| %s | %s | %s | %d | %s | %s | %s | %s / %s | %s | %s / %s | %s | %s |" % (
                label, cellname, mode, len(runs), ", ".join(dict.fromkeys(bnds)), uniq(preds) if mode == "replay" else "-",
                "/".join("-" if x is None else str(x) for x in tb), f0(mn(sb)), f0(med(sb)),
                "/".join("-" if x is None else str(x) for x in tot), f0(mn(walls)), f0(med(walls)),
                f0(med(su)), uniq(states) if mode == "replay" else "-"))
            if len(set(bnds)) > 1:
                differ.append("%s, cell %s, %s: the repeats found different boundaries: %s" % (label, cellname, mode, ", ".join(bnds)))
if differ:
    print()
    for d in differ:
        print(d)
EOF
}

trials_list() {
  local label pp rp
  while IFS=$'\t' read -r label pp rp; do
    for f in "$pp" "$rp"; do
      [ -f "$f" ] || continue
      printf '  %-15s %-10s %s\n' "$label" "$(basename "$f" .json | sed 's/^[^.]*\.//')" \
        "$(jq -r '[(.trials + ((.confirm // []) | map(. + {confirm: true}))) | sort_by(.id)[] | "\(.micro_batch):\(.outcome)\(if .recorded == true then "R" else "" end)\(if .confirm == true then "C" else "" end)\(if .checkpointing then "c" else "" end)"] | join(" ")' "$f")"
    done
  done < <(cut -f1-3 "$work/jobs.tsv")
}

legend() {
  cat <<'EOF'
cell: grad_accum/checkpointing. boundary: what each repeat found, largest
fit/smallest failure ("-": none, e.g. the top of --batch fitted); one value
when all repeats agree. replay's prediction: first_prediction of the largest
fit. trials to the exact boundary: that cell's trials, per repeat in run
order, until they hold a fit at the final largest fit B and a failure
(oom/timeout/hang) at B+step, or a fit at B when B is the top of --batch;
replay's count includes its recording trials, and both count confirmation
runs (one that fails at B+step settles the boundary); s to the boundary: those
trials' wall_s summed. whole run: summary.trials per repeat, and the wall
time measured around autobatch (confirmation run included). start-ups x S:
(trials + confirmation runs) x the job's start-up S (see the notes), what
the start-ups cost again on a GPU, where S is 20-60 s. "-": not measured.
EOF
}

{
  echo "commit $commit, build $build_type, $ncpu cores, load avg $load_start at the start, $load_end at the end"
  echo
  table
  echo
  legend
  if [ -s "$work/notes.txt" ]; then echo; echo "notes:"; sed 's/^/  /' "$work/notes.txt"; fi
} > "$work/table.txt"
cat "$work/table.txt"

if [ "$save" = 1 ]; then
  out="$root/bench/results/replay-cpu-$commit.txt"
  mkdir -p "$root/bench/results"
  {
    echo "autobatch --replay vs plain search, CPU, under --trial-memory-limit"
    echo "(bash bench/replay.sh --save --jobs ${jobs// /,} --repeats $repeats)"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "commit: $commit; build: CMAKE_BUILD_TYPE=$build_type ($ab_src)"
    echo "machine: $ncpu cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -sr), shared with other work"
    echo "load avg: $load_start at the start, $load_end at the end"
    echo "repeats: $repeats per job, plain and --replay interleaved (plain first in odd repeats)"
    echo "torch: $tts_torch ($sys_py, jobs train_tts*); $real_torch, transformers $real_tf, f5-tts $f5_ver, coqui-tts $coqui_ver"
    echo "  (${real_py:-none}, jobs orpheus-like, parler-like, f5-tts, coqui-tts)"
    echo "environment of every run: MALLOC_MMAP_THRESHOLD_=65536 MALLOC_ARENA_MAX=1 OMP_NUM_THREADS=1 PYTHONHASHSEED=0"
    echo "  (orpheus-like, parler-like, f5-tts, coqui-tts also MKL_NUM_THREADS=1 and HF offline, as tests/e2e/test_real_*.sh;"
    echo "  f5-tts also PYTHONPATH=\$WORK/f5/F5-TTS/src, coqui-tts MPLBACKEND=Agg; f5-tts's batch is in mel frames, 200 a clip)"
    echo "bench wall time: ${total_s}s"
    echo
    cat "$work/table.txt"
    echo
    echo "replay log (autobatch stderr, --replay runs):"
    sed 's/^/  /' "$work/replay-log.txt"
    echo
    echo "trials in run order (micro-batch:outcome, R = recording trial, C = confirmation run, c = checkpointing on):"
    trials_list
    echo
    echo "commands (autobatch = $ab_src, sha256 $ab_id; \$WORK = a temporary directory, removed at the end):"
    sed -e "s|$work|\$WORK|g" -e 's/^/  /' "$work/commands.txt"
  } > "$out.tmp"
  mv "$out.tmp" "$out"
  echo "wrote $out" >&2
fi
