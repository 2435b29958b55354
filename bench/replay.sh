#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Replay bench: autobatch's search with and without --replay on real CPU
# training jobs, under --trial-memory-limit (bench/README.md, "Replay bench").
#
#   bash bench/replay.sh           run every job twice (plain, then --replay)
#                                  and print the table
#   bash bench/replay.sh --save    also write the table, the commands, the
#                                  machine and the replay log lines to
#                                  bench/results/replay-cpu.txt
#   bash bench/replay.sh --jobs f5,coqui
#                                  only these jobs (names as in BENCH_JOBS);
#                                  a saved file should come from a full run
#
# Environment: AUTOBATCH (default build-test/autobatch, else build/autobatch),
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
usage() { echo "usage: bash bench/replay.sh [--save] [--jobs JOB,JOB...]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --save) save=1 ;;
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
differ = [r for r in rows if "-" not in (r[2], r[3]) and r[2] != r[3]]
if differ:
    print()
for r in differ:
    print("%s, cell %s: the two runs found different boundaries: plain %s, replay %s"
          % (r[0], r[1], r[2], r[3]))
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
    echo "trials in run order (micro-batch:outcome, R = recording trial, c = checkpointing on):"
    trials_list
    echo
    echo "commands (autobatch = $ab_src, sha256 $ab_id; \$WORK = a temporary directory, removed at the end):"
    sed -e "s|$work|\$WORK|g" -e 's/^/  /' "$work/commands.txt"
  } > "$out.tmp"
  mv "$out.tmp" "$out"
  echo "wrote $out" >&2
fi
