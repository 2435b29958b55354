#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Real anchors bench: autobatch against the batch-size finders people use,
# run for real, side by side, on real CPU PyTorch jobs under a memory cap
# (bench/README.md's search bench re-implements these finders; this one
# runs the released code):
#   autobatch   the binary, on the job itself (--trial-memory-limit);
#   lightning   PyTorch Lightning's Tuner.scale_batch_size(mode="binsearch")
#               on the same model and data in a LightningModule
#               (bench/real_anchors/lightning_job.py), then trainer.fit;
#   hf          the Hugging Face Trainer with auto_find_batch_size=True
#               (accelerate's find_executable_batch_size), on an HF Trainer
#               script: bench/real_anchors/hf_tts.py for the first job, the
#               job's own train.py (one line added) for the second.
# Jobs: "tts", examples/pytorch/train_tts.py --worst_case, and "orpheus",
# examples/trainers/orpheus_like (HF Trainer, config.yaml), both on the
# torch 2.x environment from `tests/real/pyenv.sh anchors`
# (tests/real/anchors.requirements.txt: torch, lightning, transformers and
# accelerate, every version pinned), so that all three tools run the same
# torch.
#
#   bash bench/real_anchors.sh           run every tool on every job, print the table
#   bash bench/real_anchors.sh --save    also write bench/results/real-anchors.txt
#                                        (date, machine, versions, caps, every
#                                        tool's trials in order, the commands)
#   bash bench/real_anchors.sh --jobs tts    only these jobs (tts, orpheus)
#
# Environment: AUTOBATCH (default build-test/autobatch, else build/autobatch),
# BENCH_STEPS (default 30: the optimizer steps of each survival run),
# BENCH_TTS_TARGET (default 24) and BENCH_ORPHEUS_TARGET (default 6): the
# cap is calibrated so that the job's largest fit is about this micro-batch,
# and autobatch searches --batch 1:2*TARGET, where the HF Trainer starts;
# BENCH_CAP_MODE (default budget, or same; see "The cap" below),
# BENCH_KEEP_WORK (set: keep the temporary directory with every log).
#
# The cap.  autobatch's --trial-memory-limit is RLIMIT_AS on each trial
# process (tuner/trial/trial.c: setrlimit(RLIMIT_AS), soft = hard); the anchors'
# whole Python process gets the same limit with `prlimit --as=BYTES`.  Under
# an address-space cap what a program maps before training counts too, and
# the programs differ there (lightning_job.py peaks about 57 MB and
# hf_tts.py about 97 MB above train_tts.py at batch 4, where a sample costs
# about 6 MB: 10 and 16 samples less room), which on a GPU they would not.  So by default (budget) every program gets the
# same room for training: its own peak after 3 steps at the calibration
# batch B1 (measured uncapped, under tests/real/direct_steps.py) plus the
# job's growth from B1 to TARGET, plus half a sample.  Where two tools run
# the same program (autobatch and hf on orpheus) the cap is the same number.
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
jobs="tts orpheus"
usage() { echo "usage: bash bench/real_anchors.sh [--save] [--jobs JOB,JOB]" >&2; exit 2; }
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
  case "$j" in tts|orpheus) ;; *) echo "bench/real_anchors.sh: unknown job $j (tts orpheus)" >&2; exit 2 ;; esac
done
steps=${BENCH_STEPS:-30}
tts_target=${BENCH_TTS_TARGET:-24}
orp_target=${BENCH_ORPHEUS_TARGET:-6}
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

py=$(bash "$root/tests/real/pyenv.sh" anchors) \
  || { echo "bench/real_anchors.sh: tests/real/pyenv.sh anchors failed" >&2; exit 1; }
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
export TMPDIR="$work/tmp" XDG_CACHE_HOME="$work/cache"
# One binary for the whole bench, even if it is rebuilt meanwhile.
ab_src=$ab
ab_id="$(sha256sum < "$ab_src" | cut -c1-16), built $(date -u -r "$ab_src" '+%Y-%m-%d %H:%M:%S UTC')"
cp "$ab_src" "$work/autobatch"
ab="$work/autobatch"
ncpu=$(nproc)               # before OMP_NUM_THREADS=1, which nproc honours

# The same for every process of every tool.
export MALLOC_MMAP_THRESHOLD_=65536 MALLOC_ARENA_MAX=1 OMP_NUM_THREADS=1 PYTHONHASHSEED=0 \
       MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=info \
       HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$work/hf" \
       TOKENIZERS_PARALLELISM=false WANDB_DISABLED=true WANDB_MODE=disabled
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ left in bench/real_anchors/ or examples/
common=(--no-cache --steps 3 --warmup 1 --quiet)
tsrun=(python3 "$here/tsrun.py")

: > "$work/runs.tsv"        # job tool program cap_kb kind log survival... (report.py)
: > "$work/commands.txt"
: > "$work/notes.txt"
note() { echo "$*" >> "$work/notes.txt"; echo "bench/real_anchors.sh: $*" >&2; }
q() { local s="" a; for a in "$@"; do s+="$(printf '%q' "$a") "; done; echo "${s% }"; }
# cmd_note LABEL DIR COMMAND...: record the exact command, $WORK for the temporary directory
cmd_note() { local label=$1 dir=$2; shift 2; echo "[$label] (cd ${dir/#$work/\$WORK} && $(q "$@"))" >> "$work/commands.txt"; }
# exit_of LOG: the status tsrun.py recorded
exit_of() { awk -F'\t' '$1 == "#exit" { print $2 }' "$1"; }

# --- calibration: VmPeak (kB) after 3 optimizer steps at one batch, uncapped
# run_direct OUT DIR COMMAND...   (prints the peak; the log is OUT.log)
run_direct() {
  local out=$1 dir=$2; shift 2
  (cd "$dir" && AB_DIRECT_STEPS=3 "$py" "$root/tests/real/direct_steps.py" "$@") > "$out.log" 2>&1 || true
  sed -n 's/^direct_steps: VmPeak:[[:space:]]*\([0-9]*\) kB$/\1/p' "$out.log" | tail -1
}

# survive LABEL LOG DIR CAP_KB COMMAND...: one full run at the answer, under
# the cap; the command is recorded under LABEL exactly as it runs
survive() {
  local label=$1 log=$2 dir=$3 cap=$4; shift 4
  cmd_note "$label" "$dir" prlimit --as=$((cap * 1024)) -- "$@"
  (cd "$dir" && "${tsrun[@]}" "$log" -- prlimit --as=$((cap * 1024)) -- "$@") || true
}

# ==== job 1: examples/pytorch/train_tts.py --worst_case ====================
tts_job() {
  local t=$tts_target b1=4 b2=16 p1 p2 ph pl slope budget cap cap_l cap_h d="$work/tts"
  mkdir -p "$d"
  p1=$(run_direct "$d/direct-$b1" "$root" examples/pytorch/train_tts.py --worst_case --per_device_train_batch_size "$b1")
  p2=$(run_direct "$d/direct-$b2" "$root" examples/pytorch/train_tts.py --worst_case --per_device_train_batch_size "$b2")
  pl=$(run_direct "$d/direct-lightning" "$root" "$here/lightning_job.py" --job tts --mode fit --batch "$b1" --steps 10)
  ph=$(run_direct "$d/direct-hf" "$root" "$here/hf_tts.py" --per_device_train_batch_size "$b1" --max_steps 10 \
       --output_dir "$d/direct-hf-out")
  if [ -z "$p1" ] || [ -z "$p2" ] || [ -z "$pl" ] || [ -z "$ph" ]; then
    note "tts: a calibration run printed no VmPeak (logs in \$WORK/tts/direct-*.log): job not run"; return
  fi
  slope=$(((p2 - p1) / (b2 - b1)))
  budget=$((slope * (t - b1) + slope / 2))
  cap=$((p1 + budget))
  if [ "$cap_mode" = budget ]; then cap_l=$((pl + budget)); cap_h=$((ph + budget)); else cap_l=$cap; cap_h=$cap; fi
  note "tts: calibration (VmPeak after 3 steps): train_tts.py ${p1}K at $b1, ${p2}K at $b2 (+${slope}K a sample);" \
       "lightning_job.py ${pl}K, hf_tts.py ${ph}K at $b1; caps ($cap_mode): job ${cap}K, lightning ${cap_l}K, hf ${cap_h}K"

  # (a) autobatch on the job, then the job at its choice (and at its largest fit, if that differs)
  local flags=(--trial-memory-limit "${cap}K" --batch "1:$((2 * t))")
  cmd_note "tts, autobatch" "$root" autobatch "${common[@]}" "${flags[@]}" --json ab.json -- \
    "$py" examples/pytorch/train_tts.py --worst_case
  (cd "$root" && "${tsrun[@]}" "$d/ab.log" -- "$ab" "${common[@]}" "${flags[@]}" --json "$d/ab.json" -- \
     "$py" examples/pytorch/train_tts.py --worst_case) || note "tts, autobatch: exit $(exit_of "$d/ab.log")"
  local surv=() b
  for b in $(jq -r '[.best.micro_batch, (.max_fit[0].micro_batch)] | map(select(. != null)) | unique | .[]' "$d/ab.json" 2>/dev/null); do
    survive "tts, autobatch, survival at $b" "$d/ab-survive-$b.log" "$root" "$cap" \
      "$py" examples/pytorch/train_tts.py --worst_case --per_device_train_batch_size "$b" --max_steps "$steps"
    surv+=("$b=$d/ab-survive-$b.log")
  done
  printf 'tts\tautobatch\ttrain_tts.py\t%s\tautobatch\t%s\t%s\t%s\n' "$cap" "$d/ab.log" "$d/ab.json" "${surv[*]:-}" >> "$work/runs.tsv"

  # (b) Lightning: scale_batch_size(mode="binsearch"), then fit in the same process
  local lcmd=("$py" "$here/lightning_job.py" --job tts --mode tune --steps "$steps" --root "$d/lightning")
  survive "tts, lightning" "$d/lightning.log" "$root" "$cap_l" "${lcmd[@]}"
  printf 'tts\tlightning\tlightning_job.py\t%s\tlightning\t%s\n' "$cap_l" "$d/lightning.log" >> "$work/runs.tsv"

  # (c) HF Trainer, auto_find_batch_size from the top of autobatch's range, $steps steps at the size it settles on
  local hcmd=("$py" "$here/hf_tts.py" --per_device_train_batch_size "$((2 * t))" --max_steps "$steps"
              --auto_find_batch_size --output_dir "$d/hf-out")
  survive "tts, hf" "$d/hf.log" "$root" "$cap_h" "${hcmd[@]}"
  printf 'tts\thf\thf_tts.py\t%s\thf\t%s\n' "$cap_h" "$d/hf.log" >> "$work/runs.tsv"
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
orpheus_job() {
  local t=$orp_target b1=1 b2=2 p1 p2 pl slope budget cap cap_l d="$work/orpheus"
  mkdir -p "$d"
  orp_dir "$d/direct-$b1" "$b1" $((4 * b1)); orp_dir "$d/direct-$b2" "$b2" $((4 * b2))
  p1=$(run_direct "$d/direct-$b1" "$d/direct-$b1" train.py)
  p2=$(run_direct "$d/direct-$b2" "$d/direct-$b2" train.py)
  pl=$(run_direct "$d/direct-lightning" "$root" "$here/lightning_job.py" --job orpheus --mode fit --batch "$b1" --steps 10)
  if [ -z "$p1" ] || [ -z "$p2" ] || [ -z "$pl" ]; then
    note "orpheus: a calibration run printed no VmPeak (logs in \$WORK/orpheus/direct-*.log): job not run"; return
  fi
  slope=$(((p2 - p1) / (b2 - b1)))
  budget=$((slope * (t - b1) + slope / 2))
  cap=$((p1 + budget))
  if [ "$cap_mode" = budget ]; then cap_l=$((pl + budget)); else cap_l=$cap; fi
  note "orpheus: calibration (VmPeak after 3 steps): train.py ${p1}K at $b1, ${p2}K at $b2 (+${slope}K a sample);" \
       "lightning_job.py ${pl}K at $b1; caps ($cap_mode): job and hf ${cap}K, lightning ${cap_l}K"

  # (a) autobatch on the job as it is (its config.yaml, 1024 rows), then survival runs:
  # batch_size B and steps*B rows, so that its one epoch is $steps steps
  orp_dir "$d/ab" 1 1024
  local flags=(--preset orpheus --trial-memory-limit "${cap}K" --batch "1:$((2 * t))" --kill-grace 2s)
  cmd_note "orpheus, autobatch" "$d/ab" autobatch "${common[@]}" "${flags[@]}" --json ab.json -- "$py" train.py
  (cd "$d/ab" && "${tsrun[@]}" "$d/ab.log" -- "$ab" "${common[@]}" "${flags[@]}" --json "$d/ab.json" -- "$py" train.py) \
    || note "orpheus, autobatch: exit $(exit_of "$d/ab.log")"
  local surv=() b
  for b in $(jq -r '[.best.micro_batch, (.max_fit[0].micro_batch)] | map(select(. != null)) | unique | .[]' "$d/ab.json" 2>/dev/null); do
    orp_dir "$d/survive-$b" "$b" $((steps * b))
    survive "orpheus, autobatch, survival at $b (config.yaml: batch_size: $b, TTS_dataset: synthetic:$((steps * b))x768)" \
      "$d/ab-survive-$b.log" "$d/survive-$b" "$cap" "$py" train.py
    surv+=("$b=$d/ab-survive-$b.log")
  done
  printf 'orpheus\tautobatch\ttrain.py\t%s\tautobatch\t%s\t%s\t%s\n' "$cap" "$d/ab.log" "$d/ab.json" "${surv[*]:-}" >> "$work/runs.tsv"

  # (b) Lightning on the same tiny Llama and rows
  local lcmd=("$py" "$here/lightning_job.py" --job orpheus --mode tune --steps "$steps" --root "$d/lightning")
  survive "orpheus, lightning" "$d/lightning.log" "$root" "$cap_l" "${lcmd[@]}"
  printf 'orpheus\tlightning\tlightning_job.py\t%s\tlightning\t%s\n' "$cap_l" "$d/lightning.log" >> "$work/runs.tsv"

  # (c) the job's own train.py with auto_find_batch_size=True (and max_steps, so
  # that the bench ends), config.yaml's batch_size at the top of autobatch's range
  orp_dir "$d/hf" $((2 * t)) 1024 "    auto_find_batch_size=True, max_steps=$steps,  # added by the bench" || return 0
  survive "orpheus, hf (train.py + 'auto_find_batch_size=True, max_steps=$steps,'; config.yaml: batch_size: $((2 * t)))" \
    "$d/hf.log" "$d/hf" "$cap" "$py" train.py
  printf 'orpheus\thf\ttrain.py (auto_find_batch_size)\t%s\thf\t%s\n' "$cap" "$d/hf.log" >> "$work/runs.tsv"
}

t_all=$SECONDS
for j in $jobs; do
  t0=$SECONDS
  case "$j" in
    tts) tts_job ;;
    orpheus) orpheus_job ;;
  esac
  echo "bench/real_anchors.sh: $j: $((SECONDS - t0))s" >&2
done
total_s=$((SECONDS - t_all))

python3 "$here/report.py" "$work/runs.tsv" --steps "$steps" > "$work/table.txt"
python3 "$here/report.py" "$work/runs.tsv" --steps "$steps" --trials > "$work/trials.txt"
{
  cat "$work/table.txt"
  if [ -s "$work/notes.txt" ]; then echo; echo "notes:"; sed -e "s|$work|\$WORK|g" -e 's/^/  /' "$work/notes.txt"; fi
} | tee "$work/out.txt"

if [ "$save" = 1 ]; then
  out="$root/bench/results/real-anchors.txt"
  mkdir -p "$root/bench/results"
  {
    echo "autobatch vs the real Lightning and HF Trainer batch-size finders, CPU, under an address-space cap"
    echo "(bash bench/real_anchors.sh --save)"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "machine: $ncpu CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -sr)"
    echo "python: $py"
    echo "versions: $versions"
    echo "autobatch: $ab_src, sha256 $ab_id"
    echo "environment of every process: MALLOC_MMAP_THRESHOLD_=65536 MALLOC_ARENA_MAX=1 OMP_NUM_THREADS=1 PYTHONHASHSEED=0"
    echo "  MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=info HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1"
    echo "survival runs: $steps optimizer steps; cap mode: $cap_mode; targets: tts $tts_target, orpheus $orp_target"
    echo "bench wall time: ${total_s}s"
    echo
    cat "$work/out.txt"
    echo
    echo "trials in run order:"
    cat "$work/trials.txt"
    echo
    echo "commands (\$WORK = a temporary directory, removed at the end):"
    sed -e "s|$work|\$WORK|g" -e 's/^/  /' "$work/commands.txt"
  } > "$out.tmp"
  mv "$out.tmp" "$out"
  echo "wrote $out" >&2
fi
