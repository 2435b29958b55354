#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Real anchors bench: autobatch against the batch-size finders people use,
# run for real, interleaved, on real CPU PyTorch jobs under a memory cap
# (bench/README.md's search bench re-implements these finders; this one
# runs the released code):
#   autobatch   the binary, on the job itself (--trial-memory-limit), with
#               its defaults (the confirmation run included);
#   lightning   PyTorch Lightning's Tuner.scale_batch_size(mode="binsearch")
#               on the same model and data in a LightningModule
#               (bench/real_anchors/lightning_job.py);
#   hf          (--tools ...,hf) the Hugging Face Trainer with
#               auto_find_batch_size=True (accelerate's
#               find_executable_batch_size), from the top of the range, on an
#               HF Trainer script: bench/real_anchors/hf_tts.py for the first
#               job, the job's own train.py (one line added) for the second.
# Jobs: "tts", examples/pytorch/train_tts.py --worst_case, and "orpheus",
# examples/trainers/orpheus_like (HF Trainer, config.yaml), both on the
# torch 2.x environment from `tests/real/pyenv.sh anchors`
# (tests/real/anchors.requirements.txt: torch, lightning, transformers and
# accelerate, every version pinned; BENCH_PY names another python that
# imports them), so that all tools run the same torch.
#
#   bash bench/real_anchors.sh                     tts, autobatch and lightning, 3 repeats
#   bash bench/real_anchors.sh --save              also write bench/results/real-anchors-<commit>.txt
#   bash bench/real_anchors.sh --jobs tts,orpheus --tools autobatch,lightning,hf --repeats 3
#
# Several caps.  Each job is run under several caps that put its boundary
# at different points of one fixed --batch range (BENCH_TTS_TARGETS, default
# "9 21 45" of 1:BENCH_TTS_RANGE 64; BENCH_ORPHEUS_TARGETS "3 5 9" of
# 1:BENCH_ORPHEUS_RANGE 12): one cap that happens to put the boundary where
# a tool starts would flatter that tool.  The table names each run's first
# size, so that can be checked.
#
# Interleaved.  Each repeat runs every (job, boundary, tool) once; the
# tools' order and the boundaries' order are rotated by one each repeat, so
# a burst of load on this shared machine falls on all alike.  Per (job,
# boundary, tool): min and median over the repeats of the time to the exact
# boundary and of the whole run, and the ratio of autobatch's medians to
# Lightning's.  The header names the commit (-dirty when tracked files
# differ from it), the build type and the load at the start and the end.
#
# What is timed (report.py, from the tsrun.py logs: each line timed as it
# arrived).  to boundary: autobatch, from its start until the trial that
# gave it both a fit at its largest fit L and a failure at L+1 ended;
# lightning, until scale_batch_size returned (it stops when high - low <= 1,
# which is the boundary; its answer is then 5% lower); hf, until its third
# step at the size it settled on (that is the boundary only when the sizes
# it tried above were one apart).  whole: autobatch's whole run (its
# throughput points and confirmation run included); lightning and hf as
# above: the search is all they do before training.
#
# GPU-hour equivalent.  On a GPU every process pays the interpreter, torch,
# the model and CUDA again; on CPU that start-up is cheap, so the CPU wall
# times flatter the tool that starts the most processes.  The table gives
# each run's process start-ups (autobatch: one per trial and per
# confirmation run; lightning and hf: 1) and start-ups x S, where S is the
# job's own start-up measured here (the calibration runs: from the start to
# "Running training"): the cost that grows with start-ups on a GPU, where S
# is 20-60 s.
#
# BENCH_STEPS (default 0): with N > 0, each answer also trains N optimizer
# steps under the same cap (autobatch's in a fresh process at its choice and
# largest fit, lightning's and hf's in their own process after the search).
#
# Environment: AUTOBATCH (default build-test/autobatch, else build/autobatch;
# a Release build for timings), BENCH_REPEATS, BENCH_JOBS, BENCH_TOOLS,
# BENCH_CAP_MODE (default budget, or same; see "The cap" below),
# BENCH_KEEP_WORK (set: keep the temporary directory with every log).
#
# The cap.  autobatch's --trial-memory-limit is RLIMIT_AS on each trial
# process (tuner/trial/trial.c: setrlimit(RLIMIT_AS), soft = hard); the anchors'
# whole Python process gets the same limit with `prlimit --as=BYTES`.  Under
# an address-space cap what a program maps before training counts too, and
# the programs differ there (lightning_job.py peaks about 57 MB and
# hf_tts.py about 97 MB above train_tts.py at batch 4, where a sample costs
# about 6 MB: 10 and 16 samples less room), which on a GPU they would not.
# So by default (budget) every program gets the same room for training: its
# own peak after 3 steps at the calibration batch B1 (measured uncapped,
# under tests/real/direct_steps.py) plus the job's growth from B1 to the
# target, plus half a sample.  Where two tools run the same program
# (autobatch and hf on orpheus) the cap is the same number.
# BENCH_CAP_MODE=same gives every tool of a job the job's own cap.
#
# Every process gets the same environment: the malloc settings that
# --trial-memory-limit trials get (MALLOC_MMAP_THRESHOLD_=65536
# MALLOC_ARENA_MAX=1; they make address-space use repeatable),
# OMP_NUM_THREADS=1 PYTHONHASHSEED=0, MKL_NUM_THREADS=1, PYTHONUNBUFFERED=1
# (the logs are timestamped as lines arrive), TRANSFORMERS_VERBOSITY=info
# (the Trainer then logs the size of each attempt), and nothing downloaded
# (HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1).  Under the cap an allocation
# fails as "DefaultCPUAllocator: can't allocate memory", which Lightning's
# is_oom_error and accelerate's should_reduce_batch_size both recognise.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
here="$root/bench/real_anchors"
save=0
jobs=${BENCH_JOBS:-tts}
tools=${BENCH_TOOLS:-autobatch lightning}
repeats=${BENCH_REPEATS:-3}
usage() { echo "usage: bash bench/real_anchors.sh [--save] [--jobs JOB,JOB] [--tools TOOL,TOOL] [--repeats N]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --save) save=1 ;;
    --jobs) [ $# -ge 2 ] || usage; jobs=${2//,/ }; shift ;;
    --jobs=*) jobs=${1#--jobs=}; jobs=${jobs//,/ } ;;
    --tools) [ $# -ge 2 ] || usage; tools=${2//,/ }; shift ;;
    --repeats) [ $# -ge 2 ] || usage; repeats=$2; shift ;;
    *) usage ;;
  esac
  shift
done
jobs=${jobs//,/ } tools=${tools//,/ }
for j in $jobs; do
  case "$j" in tts|orpheus) ;; *) echo "bench/real_anchors.sh: unknown job $j (tts orpheus)" >&2; exit 2 ;; esac
done
for t in $tools; do
  case "$t" in autobatch|lightning|hf) ;; *) echo "bench/real_anchors.sh: unknown tool $t (autobatch lightning hf)" >&2; exit 2 ;; esac
done
[ "$repeats" -ge 1 ] 2>/dev/null || { echo "bench/real_anchors.sh: --repeats wants a number >= 1" >&2; exit 2; }
steps=${BENCH_STEPS:-0}
tts_range=${BENCH_TTS_RANGE:-64}
tts_targets=${BENCH_TTS_TARGETS:-9 21 45}
orp_range=${BENCH_ORPHEUS_RANGE:-12}
orp_targets=${BENCH_ORPHEUS_TARGETS:-3 5 9}
cap_mode=${BENCH_CAP_MODE:-budget}
case "$cap_mode" in budget|same) ;; *) echo "bench/real_anchors.sh: BENCH_CAP_MODE is budget or same" >&2; exit 2 ;; esac

ab=${AUTOBATCH:-}
if [ -z "$ab" ]; then
  for c in "$root/build-test/autobatch" "$root/build/autobatch"; do
    [ -x "$c" ] && { ab=$c; break; }
  done
fi
[ -n "$ab" ] && [ -x "$ab" ] || { echo "bench/real_anchors.sh: no autobatch binary (set AUTOBATCH or build it)" >&2; exit 1; }
command -v prlimit >/dev/null || { echo "bench/real_anchors.sh: needs prlimit (util-linux)" >&2; exit 1; }
command -v jq >/dev/null || { echo "bench/real_anchors.sh: needs jq" >&2; exit 1; }
# the build type of the binary: from the CMakeCache.txt beside it, if any
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$(dirname "$ab")/CMakeCache.txt" 2>/dev/null || true)
build_type=${build_type:-unknown (no CMakeCache.txt beside $ab)}
commit=$(git -C "$root" rev-parse --short HEAD)
[ -z "$(git -C "$root" status --porcelain -uno 2>/dev/null)" ] || commit="$commit-dirty"
ncpu=$(getconf _NPROCESSORS_ONLN)   # not nproc: it obeys OMP_NUM_THREADS
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

py=${BENCH_PY:-}
if [ -z "$py" ]; then
  py=$(bash "$root/tests/real/pyenv.sh" anchors) \
    || { echo "bench/real_anchors.sh: tests/real/pyenv.sh anchors failed (BENCH_PY names another python)" >&2; exit 1; }
fi
"$py" -c "import torch, lightning, transformers, accelerate, yaml" \
  || { echo "bench/real_anchors.sh: $py cannot import the anchors" >&2; exit 1; }
versions=$("$py" -c 'import importlib.metadata as m
print(", ".join("%s %s" % (p, m.version(p)) for p in
      ("torch", "lightning", "transformers", "accelerate", "torchmetrics", "lightning-utilities")))')

work=$(mktemp -d "${TMPDIR:-/tmp}/ab-real-anchors-XXXXXX")
if [ -n "${BENCH_KEEP_WORK:-}" ]; then
  echo "bench/real_anchors.sh: keeping $work (BENCH_KEEP_WORK)" >&2
else
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/tmp" "$work/cache" "$work/hf"
export TMPDIR="$work/tmp" XDG_CACHE_HOME="$work/cache" XDG_STATE_HOME="$work/state"
# One binary for the whole bench, even if it is rebuilt meanwhile.
ab_src=$ab
ab_id="$(sha256sum < "$ab_src" | cut -c1-16), built $(date -u -r "$ab_src" '+%Y-%m-%d %H:%M:%S UTC')"
cp "$ab_src" "$work/autobatch"
ab="$work/autobatch"

# The same for every process of every tool.
export MALLOC_MMAP_THRESHOLD_=65536 MALLOC_ARENA_MAX=1 OMP_NUM_THREADS=1 PYTHONHASHSEED=0 \
       MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=info \
       HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$work/hf" \
       TOKENIZERS_PARALLELISM=false WANDB_DISABLED=true WANDB_MODE=disabled
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ left in bench/real_anchors/ or examples/
common=(--no-cache --steps 3 --warmup 1 --quiet)
tsrun=(python3 "$here/tsrun.py")

# runs.tsv, one line a run (report.py):
#   job tool program cap_kb kind log results.json survival... rep target range
: > "$work/runs.tsv"
: > "$work/startup.tsv"     # job program seconds (calibration runs: start to "Running training")
: > "$work/commands.txt"
: > "$work/notes.txt"
note() { echo "$*" >> "$work/notes.txt"; echo "bench/real_anchors.sh: $*" >&2; }
q() { local s="" a; for a in "$@"; do s+="$(printf '%q' "$a") "; done; echo "${s% }"; }
# cmd_note LABEL DIR COMMAND...: record the exact command once, $WORK for the temporary directory
cmd_note() {
  local label=$1 dir=$2; shift 2
  local line="[$label] (cd ${dir/#$work/\$WORK} && $(q "$@"))"
  grep -qxF -- "$line" "$work/commands.txt" || echo "$line" >> "$work/commands.txt"
}
# exit_of LOG: the status tsrun.py recorded
exit_of() { awk -F'\t' '$1 == "#exit" { print $2 }' "$1"; }

# --- calibration: VmPeak (kB) after 3 optimizer steps at one batch, uncapped;
# the log is timed by tsrun.py, so it also gives the program's start-up (from
# its start to the Trainer's or the script's "Running training" line)
# run_direct OUT DIR COMMAND...   (prints the peak; the log is OUT.log)
run_direct() {
  local out=$1 dir=$2; shift 2
  (cd "$dir" && AB_DIRECT_STEPS=3 "${tsrun[@]}" "$out.log" -- "$py" "$root/tests/real/direct_steps.py" "$@") \
    > /dev/null 2>&1 || true
  sed -n 's/^[0-9.]*\tdirect_steps: VmPeak:[[:space:]]*\([0-9]*\) kB$/\1/p' "$out.log" | tail -1
}
# startup_of LOG: seconds to the first "Running training" (or the Lightning module's start event)
startup_of() { awk -F'\t' '/Running training|ANCHOR \{"ev": "start"/ { print $1; exit }' "$1"; }

# run_tool JOB TOOL REP TARGET: one search, logged; a line in runs.tsv
# (the caps, commands and directories come from the job's calibration: CAP_*)
run_tool() {
  local job=$1 tool=$2 rep=$3 t=$4 d="$work/$1/t$4-r$3" range cap surv=() b
  mkdir -p "$d"
  cap=${CAP[$job:$t:$tool]}
  range=$([ "$job" = tts ] && echo "$tts_range" || echo "$orp_range")
  case "$job:$tool" in
    tts:autobatch)
      local flags=(--trial-memory-limit "${cap}K" --batch "1:$range")
      cmd_note "tts, autobatch, boundary $t" "$root" autobatch "${common[@]}" "${flags[@]}" --json ab.json -- \
        "$py" examples/pytorch/train_tts.py --worst_case
      (cd "$root" && "${tsrun[@]}" "$d/ab.log" -- "$ab" "${common[@]}" "${flags[@]}" --json "$d/ab.json" -- \
         "$py" examples/pytorch/train_tts.py --worst_case) || note "tts $t rep $rep, autobatch: exit $(exit_of "$d/ab.log")"
      if [ "$steps" -gt 0 ]; then
        for b in $(jq -r '[.best.micro_batch, (.max_fit[0].micro_batch)] | map(select(. != null)) | unique | .[]' "$d/ab.json" 2>/dev/null); do
          cmd_note "tts, autobatch, survival" "$root" prlimit --as=$((cap * 1024)) -- \
            "$py" examples/pytorch/train_tts.py --worst_case --per_device_train_batch_size B --max_steps "$steps"
          (cd "$root" && "${tsrun[@]}" "$d/ab-survive-$b.log" -- prlimit --as=$((cap * 1024)) -- \
             "$py" examples/pytorch/train_tts.py --worst_case --per_device_train_batch_size "$b" --max_steps "$steps") || true
          surv+=("$b=$d/ab-survive-$b.log")
        done
      fi
      printf 'tts\tautobatch\ttrain_tts.py\t%s\tautobatch\t%s\t%s\t%s' "$cap" "$d/ab.log" "$d/ab.json" "${surv[*]:-}" >> "$work/runs.tsv" ;;
    orpheus:autobatch)
      orp_dir "$d/ab" 1 1024
      local flags=(--preset orpheus --trial-memory-limit "${cap}K" --batch "1:$range" --kill-grace 2s)
      cmd_note "orpheus, autobatch, boundary $t" "$d/ab" autobatch "${common[@]}" "${flags[@]}" --json ab.json -- "$py" train.py
      (cd "$d/ab" && "${tsrun[@]}" "$d/ab.log" -- "$ab" "${common[@]}" "${flags[@]}" --json "$d/ab.json" -- "$py" train.py) \
        || note "orpheus $t rep $rep, autobatch: exit $(exit_of "$d/ab.log")"
      if [ "$steps" -gt 0 ]; then
        for b in $(jq -r '[.best.micro_batch, (.max_fit[0].micro_batch)] | map(select(. != null)) | unique | .[]' "$d/ab.json" 2>/dev/null); do
          orp_dir "$d/survive-$b" "$b" $((steps * b))
          (cd "$d/survive-$b" && "${tsrun[@]}" "$d/ab-survive-$b.log" -- prlimit --as=$((cap * 1024)) -- "$py" train.py) || true
          surv+=("$b=$d/ab-survive-$b.log")
        done
      fi
      printf 'orpheus\tautobatch\ttrain.py\t%s\tautobatch\t%s\t%s\t%s' "$cap" "$d/ab.log" "$d/ab.json" "${surv[*]:-}" >> "$work/runs.tsv" ;;
    *:lightning)
      # scale_batch_size(mode="binsearch"), then (with BENCH_STEPS > 0) fit in the same process
      local lcmd=("$py" "$here/lightning_job.py" --job "$job" --mode tune --steps "$steps" --root "$d/lightning")
      cmd_note "$job, lightning, boundary $t" "$root" prlimit --as=$((cap * 1024)) -- "${lcmd[@]}"
      (cd "$root" && "${tsrun[@]}" "$d/lightning.log" -- prlimit --as=$((cap * 1024)) -- "${lcmd[@]}") || true
      printf '%s\tlightning\tlightning_job.py\t%s\tlightning\t%s\t\t' "$job" "$cap" "$d/lightning.log" >> "$work/runs.tsv" ;;
    tts:hf)
      # auto_find_batch_size from the top of autobatch's range; max(steps, 3) steps at the size it settles on
      local hs=$((steps > 3 ? steps : 3))
      local hcmd=("$py" "$here/hf_tts.py" --per_device_train_batch_size "$range" --max_steps "$hs"
                  --auto_find_batch_size --output_dir "$d/hf-out")
      cmd_note "tts, hf, boundary $t" "$root" prlimit --as=$((cap * 1024)) -- "${hcmd[@]}"
      (cd "$root" && "${tsrun[@]}" "$d/hf.log" -- prlimit --as=$((cap * 1024)) -- "${hcmd[@]}") || true
      printf 'tts\thf\thf_tts.py\t%s\thf\t%s\t\t' "$cap" "$d/hf.log" >> "$work/runs.tsv" ;;
    orpheus:hf)
      local hs=$((steps > 3 ? steps : 3))
      orp_dir "$d/hf" "$range" 1024 "    auto_find_batch_size=True, max_steps=$hs,  # added by the bench" || return 0
      cmd_note "orpheus, hf (train.py + 'auto_find_batch_size=True, max_steps=$hs,'; config.yaml: batch_size: $range), boundary $t" \
        "$d/hf" prlimit --as=$((cap * 1024)) -- "$py" train.py
      (cd "$d/hf" && "${tsrun[@]}" "$d/hf.log" -- prlimit --as=$((cap * 1024)) -- "$py" train.py) || true
      printf 'orpheus\thf\ttrain.py (auto_find_batch_size)\t%s\thf\t%s\t\t' "$cap" "$d/hf.log" >> "$work/runs.tsv" ;;
  esac
  printf '\t%s\t%s\t%s\n' "$rep" "$t" "$range" >> "$work/runs.tsv"
  local main_log
  main_log=$(awk -F'\t' 'END { print $6 }' "$work/runs.tsv")
  echo "bench/real_anchors.sh: $job boundary $t, repeat $rep, $tool: exit $(exit_of "$main_log"), $(awk -F'\t' '$1 == "#exit" { print $3 }' "$main_log") s" >&2
}

declare -A CAP

# ==== job 1: examples/pytorch/train_tts.py --worst_case ====================
tts_calibrate() {
  local b1=4 b2=16 p1 p2 ph pl slope budget cap t d="$work/tts"
  mkdir -p "$d"
  p1=$(run_direct "$d/direct-$b1" "$root" examples/pytorch/train_tts.py --worst_case --per_device_train_batch_size "$b1")
  p2=$(run_direct "$d/direct-$b2" "$root" examples/pytorch/train_tts.py --worst_case --per_device_train_batch_size "$b2")
  pl=$(run_direct "$d/direct-lightning" "$root" "$here/lightning_job.py" --job tts --mode fit --batch "$b1" --steps 10)
  ph=$(run_direct "$d/direct-hf" "$root" "$here/hf_tts.py" --per_device_train_batch_size "$b1" --max_steps 10 \
       --output_dir "$d/direct-hf-out")
  if [ -z "$p1" ] || [ -z "$p2" ] || [ -z "$pl" ] || [ -z "$ph" ]; then
    note "tts: a calibration run printed no VmPeak (logs in \$WORK/tts/direct-*.log): job not run"; return 1
  fi
  printf 'tts\ttrain_tts.py\t%s\ntts\ttrain_tts.py\t%s\ntts\tlightning_job.py\t%s\ntts\thf_tts.py\t%s\n' \
    "$(startup_of "$d/direct-$b1.log")" "$(startup_of "$d/direct-$b2.log")" \
    "$(startup_of "$d/direct-lightning.log")" "$(startup_of "$d/direct-hf.log")" >> "$work/startup.tsv"
  slope=$(((p2 - p1) / (b2 - b1)))
  for t in $tts_targets; do
    budget=$((slope * (t - b1) + slope / 2))
    cap=$((p1 + budget))
    CAP[tts:$t:autobatch]=$cap
    if [ "$cap_mode" = budget ]; then CAP[tts:$t:lightning]=$((pl + budget)); CAP[tts:$t:hf]=$((ph + budget))
    else CAP[tts:$t:lightning]=$cap; CAP[tts:$t:hf]=$cap; fi
    note "tts, boundary about $t of 1:$tts_range: caps ($cap_mode) job ${cap}K, lightning ${CAP[tts:$t:lightning]}K, hf ${CAP[tts:$t:hf]}K"
  done
  note "tts: calibration (VmPeak after 3 steps): train_tts.py ${p1}K at $b1, ${p2}K at $b2 (+${slope}K a sample);" \
       "lightning_job.py ${pl}K, hf_tts.py ${ph}K at $b1"
}

# ==== job 2: examples/trainers/orpheus_like (HF Trainer, config.yaml in the cwd)
# orp_dir DIR BATCH ROWS [EXTRA]: train.py and config.yaml as the job has them,
# with batch_size and the synthetic rows set; EXTRA: TrainingArguments lines
# to add (the one edit an HF user makes to turn auto_find_batch_size on).
orp_dir() {
  local dir=$1 b=$2 rows=$3 extra=${4:-}
  rm -rf "$dir"; mkdir -p "$dir"
  if [ -n "$extra" ]; then
    awk -v add="$extra" '{ print } $0 == "    num_train_epochs=epochs," { print add }' \
      "$root/examples/trainers/orpheus_like/train.py" > "$dir/train.py"
    grep -qxF "$extra" "$dir/train.py" || { note "orpheus: could not add '$extra' to train.py"; return 1; }
  else
    cp "$root/examples/trainers/orpheus_like/train.py" "$dir/"
  fi
  sed -e "s/^batch_size: .*/batch_size: $b/" -e "s/^TTS_dataset: synthetic:[0-9]*x/TTS_dataset: synthetic:${rows}x/" \
    "$root/examples/trainers/orpheus_like/config.yaml" > "$dir/config.yaml"
}
orpheus_calibrate() {
  local b1=1 b2=2 p1 p2 pl slope budget cap t d="$work/orpheus"
  mkdir -p "$d"
  orp_dir "$d/direct-$b1" "$b1" $((4 * b1)); orp_dir "$d/direct-$b2" "$b2" $((4 * b2))
  p1=$(run_direct "$d/direct-$b1" "$d/direct-$b1" train.py)
  p2=$(run_direct "$d/direct-$b2" "$d/direct-$b2" train.py)
  pl=$(run_direct "$d/direct-lightning" "$root" "$here/lightning_job.py" --job orpheus --mode fit --batch "$b1" --steps 10)
  if [ -z "$p1" ] || [ -z "$p2" ] || [ -z "$pl" ]; then
    note "orpheus: a calibration run printed no VmPeak (logs in \$WORK/orpheus/direct-*.log): job not run"; return 1
  fi
  printf 'orpheus\ttrain.py\t%s\norpheus\ttrain.py\t%s\norpheus\tlightning_job.py\t%s\n' \
    "$(startup_of "$d/direct-$b1.log")" "$(startup_of "$d/direct-$b2.log")" "$(startup_of "$d/direct-lightning.log")" \
    >> "$work/startup.tsv"
  slope=$(((p2 - p1) / (b2 - b1)))
  for t in $orp_targets; do
    budget=$((slope * (t - b1) + slope / 2))
    cap=$((p1 + budget))
    CAP[orpheus:$t:autobatch]=$cap; CAP[orpheus:$t:hf]=$cap
    if [ "$cap_mode" = budget ]; then CAP[orpheus:$t:lightning]=$((pl + budget)); else CAP[orpheus:$t:lightning]=$cap; fi
    note "orpheus, boundary about $t of 1:$orp_range: caps ($cap_mode) job and hf ${cap}K, lightning ${CAP[orpheus:$t:lightning]}K"
  done
  note "orpheus: calibration (VmPeak after 3 steps): train.py ${p1}K at $b1, ${p2}K at $b2 (+${slope}K a sample);" \
       "lightning_job.py ${pl}K at $b1"
}

t_all=$SECONDS
ready=()
for j in $jobs; do
  t0=$SECONDS
  case "$j" in
    tts) tts_calibrate && ready+=(tts) ;;
    orpheus) orpheus_calibrate && ready+=(orpheus) ;;
  esac
  echo "bench/real_anchors.sh: $j calibrated in $((SECONDS - t0))s" >&2
done

# The runs, interleaved: each repeat runs every (job, boundary, tool) once;
# the tools' order is rotated by one each repeat and the boundaries' order
# too, so that a burst of load on this shared machine falls on all alike.
read -r -a TOOLS <<<"$tools"
for ((rep = 1; rep <= repeats; rep++)); do
  torder=()
  for ((k = 0; k < ${#TOOLS[@]}; k++)); do torder+=("${TOOLS[$(((k + rep - 1) % ${#TOOLS[@]}))]}"); done
  for j in "${ready[@]}"; do
    read -r -a TG <<<"$([ "$j" = tts ] && echo "$tts_targets" || echo "$orp_targets")"
    for ((k = 0; k < ${#TG[@]}; k++)); do
      t=${TG[$(((k + rep - 1) % ${#TG[@]}))]}
      for tool in "${torder[@]}"; do run_tool "$j" "$tool" "$rep" "$t"; done
    done
  done
done
total_s=$((SECONDS - t_all))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

python3 "$here/report.py" "$work/runs.tsv" --steps "$steps" --startup "$work/startup.tsv" > "$work/table.txt"
python3 "$here/report.py" "$work/runs.tsv" --steps "$steps" --runs > "$work/runs.txt"
python3 "$here/report.py" "$work/runs.tsv" --steps "$steps" --trials > "$work/trials.txt"
{
  echo "commit $commit, build $build_type, $ncpu cores, load avg $load_start at the start, $load_end at the end"
  echo
  cat "$work/table.txt"
  if [ -s "$work/notes.txt" ]; then echo; echo "notes:"; sed -e "s|$work|\$WORK|g" -e 's/^/  /' "$work/notes.txt"; fi
} | tee "$work/out.txt"

if [ "$save" = 1 ]; then
  out="$root/bench/results/real-anchors-$commit.txt"
  mkdir -p "$root/bench/results"
  {
    echo "autobatch vs the real Lightning (and HF Trainer) batch-size finders, CPU, under an address-space cap"
    echo "(bash bench/real_anchors.sh --save --jobs ${jobs// /,} --tools ${tools// /,} --repeats $repeats)"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "commit: $commit ($(git -C "$root" log -1 --format='%cd %s' --date=short HEAD | cut -c1-100))"
    echo "build: CMAKE_BUILD_TYPE=$build_type; autobatch $ab_src, sha256 $ab_id"
    echo "machine: $ncpu cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -sr), shared with other work"
    echo "load avg: $load_start at the start, $load_end at the end"
    echo "python: $py"
    echo "versions: $versions"
    echo "environment of every process: MALLOC_MMAP_THRESHOLD_=65536 MALLOC_ARENA_MAX=1 OMP_NUM_THREADS=1 PYTHONHASHSEED=0"
    echo "  MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=info HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1"
    echo "repeats: $repeats, interleaved (tools and boundaries rotated by one each repeat)"
    echo "boundaries: tts about $tts_targets of 1:$tts_range; orpheus about $orp_targets of 1:$orp_range; cap mode: $cap_mode"
    echo "survival runs: $([ "$steps" -gt 0 ] && echo "$steps optimizer steps" || echo "none (BENCH_STEPS=0)")"
    echo "bench wall time: ${total_s}s"
    echo
    cat "$work/table.txt"
    if [ -s "$work/notes.txt" ]; then echo; echo "notes:"; sed -e "s|$work|\$WORK|g" -e 's/^/  /' "$work/notes.txt"; fi
    echo
    echo "every run, in the order run:"
    cat "$work/runs.txt"
    echo
    echo "trials in run order:"
    sed -e "s|$work|\$WORK|g" "$work/trials.txt"
    echo
    echo "commands (\$WORK = a temporary directory, removed at the end):"
    sed -e "s|$work|\$WORK|g" -e 's/^/  /' "$work/commands.txt"
  } > "$out.tmp"
  mv "$out.tmp" "$out"
  echo "wrote $out" >&2
fi
