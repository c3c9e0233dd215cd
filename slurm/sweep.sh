#!/usr/bin/env bash
# Scaling sweep: one paired job (slurm/pair.sbatch) per GPU count, then a compare job that
# starts when all of them succeeded and writes the scaling report into the sweep folder.
#
#   slurm/sweep.sh --gpus 1,2,4,8 --mode weak [--batch 64] [--nodes 1] -- --precision bf16
#   slurm/sweep.sh --gpus 1,2,4,8 --mode strong --batch 256
#   slurm/sweep.sh --gpus 1,2 --mode weak --cpu --wait -- --image-size 64 --steps 5   # CI
#   slurm/sweep.sh --shapes 1x1,1x2,2x2 --mode weak      # nodes x GPUs per node, across nodes
#
# Options:
#   --gpus LIST      GPUs (= ranks) per node, comma-separated; one paired job each
#   --mode MODE      weak: fixed --batch-size-per-device; strong: fixed --global-batch-size
#   --batch N        images per device (weak; default the runner's) or per step (strong; required)
#   --nodes N        nodes per job (default 1)
#   --shapes LIST    instead of --gpus/--nodes: NODESxGPUS per job, e.g. 1x1,1x2,2x2
#   --repeats N      paired repeats per job (default $REPEATS or 3)
#   --warmup-runs N  uncounted runs of each arm first, per job (default $WARMUP_RUNS or 1)
#   --cpu            CPU ranks instead of GPUs (ACCELERATOR=cpu, no GPU request)
#   --sbatch ARG     an sbatch option for every job, e.g. --sbatch=--partition=gpu (repeatable)
#   --outdir DIR     the sweep folder (default results/sweep-<mode>-<UTC time>); must be new or empty
#   --wait           return only when the compare job has ended: 0 if it succeeded
#   -- OPTIONS       runner options for every run
# Other variables of slurm/common.sh (PYTHON, PRECISION, STEPS, ...) pass through to the jobs.
#
# Prints the job ids and the sweep folder: <folder>/devices-<n>/ (nodes-<m>-devices-<n>/ for
# several nodes) is each paired job's
# experiment folder (results/, logs/, manifest.json, report; docs/experiments.md); <folder>/report.txt, report.md and scaling.png compare them all.
set -euo pipefail

PROG=sweep.sh
die() { echo "$PROG: error: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
# need OPTION [VALUE...]: OPTION must be followed by a value (else one line, exit 2).
need() { (( $# >= 2 )) || die "$1 needs a value (see --help)"; }
# whole OPTION VALUE LOW HIGH: VALUE is a whole number in LOW..HIGH. Checked as text first,
# so that bash arithmetic never sees a number it would overflow (or read as octal).
whole() {
  [[ $2 =~ ^[0-9]+$ ]] || die "$1 $2: use a whole number >= $3"
  (( ${#2} <= 9 && 10#$2 <= $4 )) || die "$1 $2: use at most $4"
  (( 10#$2 >= $3 )) || die "$1 $2: use a whole number >= $3"
}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
gpus="" shapes="" mode="" batch="" nodes=1 repeats=${REPEATS:-3} warmup=${WARMUP_RUNS:-1}
cpu=0 outdir="" given_outdir=0 wait=0
sbatch_args=()
while (( $# )); do
  case $1 in
    --gpus) need "$@"; gpus=$2; shift ;;
    --gpus=*) gpus=${1#*=} ;;
    --mode) need "$@"; mode=$2; shift ;;
    --mode=*) mode=${1#*=} ;;
    --batch) need "$@"; batch=$2; shift ;;
    --batch=*) batch=${1#*=} ;;
    --shapes) need "$@"; shapes=$2; shift ;;
    --shapes=*) shapes=${1#*=} ;;
    --nodes) need "$@"; nodes=$2; shift ;;
    --nodes=*) nodes=${1#*=} ;;
    --repeats) need "$@"; repeats=$2; shift ;;
    --repeats=*) repeats=${1#*=} ;;
    --warmup-runs) need "$@"; warmup=$2; shift ;;
    --warmup-runs=*) warmup=${1#*=} ;;
    --cpu) cpu=1 ;;
    --sbatch) need "$@"; sbatch_args+=("$2"); shift ;;
    --sbatch=*) sbatch_args+=("${1#*=}") ;;
    --outdir) need "$@"; outdir=$2; given_outdir=1; shift ;;
    --outdir=*) outdir=${1#*=}; given_outdir=1 ;;
    --wait) wait=1 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option $1 (runner options go after --; see --help)" ;;
  esac
  shift
done
runner_args=("$@")

# Check everything before the first submission: half a sweep in the queue helps nobody.
# Bounds: more GPUs or nodes than any cluster has is a typo, and keeps g x n far from overflow.
MAX_PER_NODE=1024 MAX_NODES=10000 MAX_RUNS=10000 MAX_BATCH=2147483647
whole --nodes "$nodes" 1 "$MAX_NODES"
if [[ -n $shapes ]]; then
  [[ -z $gpus ]] || die "--shapes replaces --gpus and --nodes; give one of them"
  [[ $shapes =~ ^[0-9]+x[0-9]+(,[0-9]+x[0-9]+)*$ ]] \
    || die "--shapes takes NODESxGPUS per job, like 1x1,1x2,2x2"
  IFS=, read -ra given <<<"$shapes"
  jobs=()
  for shape in "${given[@]}"; do
    whole "--shapes $shape: nodes" "${shape%x*}" 1 "$MAX_NODES"
    whole "--shapes $shape: GPUs per node" "${shape#*x}" 1 "$MAX_PER_NODE"
    jobs+=("$((10#${shape%x*}))x$((10#${shape#*x}))")
  done
else
  [[ $gpus =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--gpus takes counts like 1,2,4,8"
  IFS=, read -ra counts <<<"$gpus"
  jobs=()
  for g in "${counts[@]}"; do
    whole --gpus "$g" 1 "$MAX_PER_NODE"
    jobs+=("$((10#$nodes))x$((10#$g))")
  done
fi
[[ $mode == weak || $mode == strong ]] || die "--mode weak (fixed batch per device) or --mode strong (fixed global batch)"
whole --repeats "$repeats" 1 "$MAX_RUNS"
whole --warmup-runs "$warmup" 0 "$MAX_RUNS"
[[ -z $batch ]] || whole --batch "$batch" 1 "$MAX_BATCH"
if [[ $mode == strong ]]; then
  [[ -n $batch ]] || die "--mode strong needs --batch (the global batch, images per step)"
  for shape in "${jobs[@]}"; do
    n=${shape%x*} g=${shape#*x}
    (( 10#$batch % (g * n) == 0 )) \
      || die "--batch $batch does not divide by the world size $(( g * n )) ($g per node x $n nodes)"
  done
fi
# The sweep folder: new, or an empty folder; the nearest existing folder above it writable.
(( given_outdir == 0 )) || [[ -n $outdir ]] || die "--outdir needs a folder"
outdir=${outdir:-$ROOT/results/sweep-$mode-$(date -u +%Y%m%d-%H%M%S)}
if [[ -e $outdir && ! -d $outdir ]]; then
  die "--outdir $outdir is not a folder; give a new folder"
fi
if [[ -d $outdir && -n $(ls -A -- "$outdir") ]]; then
  die "$outdir is not empty; give a new --outdir"
fi
above=$outdir
while [[ ! -e $above ]]; do above=$(dirname -- "$above"); done
[[ -d $above ]] || die "--outdir $outdir: $above is not a folder"
[[ -w $above ]] || die "--outdir $outdir: $above is not writable"
command -v sbatch >/dev/null || die "sbatch not found; run this on a Slurm login node"

mkdir -p -- "$outdir" || die "--outdir $outdir: cannot create it"
outdir=$(cd -- "$outdir" && pwd)

if (( cpu )); then accelerator=cpu; else accelerator=gpu; fi
# The jobs see the same variables as this shell (sbatch --export=ALL), plus these.
export BENCH_ROOT=$ROOT ACCELERATOR=$accelerator REPEATS=$repeats WARMUP_RUNS=$warmup
export BATCH_MODE=$mode BATCH_SIZE=$batch

ids=()
printf '%-14s %s\n' "sweep folder" "$outdir"
for shape in "${jobs[@]}"; do
  n=${shape%x*} g=${shape#*x}
  if (( n == 1 )); then name=devices-$g; else name=nodes-$n-devices-$g; fi
  dir=$outdir/$name
  # The job's log sits beside its folder (the experiment wants the folder new or empty);
  # pair.sbatch copies it into the folder as job.out at the end.
  # Tasks per node, GPUs per node, DEVICES and NODES all come from g and nodes; a CPU sweep
  # asks for no GPU (--gpus-per-node=0 overrides the #SBATCH line).
  id=$(OUTDIR=$dir DEVICES=$g NODES=$n sbatch --parsable \
    --job-name="sweep-$mode-$name" --nodes="$n" --ntasks-per-node="$g" \
    --gpus-per-node="$(( cpu ? 0 : g ))" --output="$outdir/$name.out" \
    ${sbatch_args[@]+"${sbatch_args[@]}"} "$ROOT/slurm/pair.sbatch" \
    ${runner_args[@]+"${runner_args[@]}"})
  id=${id%%;*}  # --parsable prints "id" or "id;cluster"
  ids+=("$id")
  printf '%-14s %s\n' "job $id" "$g per node x $n node(s), $accelerator: $dir"
done

# afterok: a scaling report over an incomplete set would mislead; kill-on-invalid-dep
# cancels the compare job when a paired job fails, instead of leaving it pending forever.
deps=$(IFS=:; echo "${ids[*]}")
final=$(sbatch --parsable --job-name="sweep-$mode-compare" --dependency="afterok:$deps" \
  --kill-on-invalid-dep=yes --output="$outdir/job.out" \
  ${sbatch_args[@]+"${sbatch_args[@]}"} "$ROOT/slurm/compare.sbatch" "$outdir")
final=${final%%;*}
printf '%-14s %s\n' "job $final" "compare after ${ids[*]}: $outdir/report.txt, report.md, scaling.png"
(( wait )) || exit 0

# --wait: poll the compare job while Slurm still knows it (accounting may be off, so sacct
# cannot be relied on); a job forgotten already is judged by its report.
poll=${SWEEP_POLL_SECONDS:-10}
while line=$(scontrol show job -o "$final" 2>/dev/null); do
  state=$(grep -o 'JobState=[A-Z_]*' <<<"$line" || true)
  state=${state#JobState=}
  case $state in
    COMPLETED) echo "$PROG: done: $outdir"; exit 0 ;;
    PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED|REQUEUE_HOLD|RESIZING|"") sleep "$poll" ;;
    *)
      reason=$(grep -o 'Reason=[^ ]*' <<<"$line" || true)
      reason=${reason#Reason=}
      # DependencyNeverSatisfied: a paired job failed (the others may still be running).
      [[ $reason != DependencyNeverSatisfied ]] || reason="a paired job failed"
      echo "$PROG: compare job $final ended $state ($reason); see the .out files under $outdir" >&2
      exit 1 ;;
  esac
done
if [[ -s $outdir/report.txt ]]; then echo "$PROG: done: $outdir"; exit 0; fi
echo "$PROG: compare job $final is gone and $outdir/report.txt was not written; see the .out files under $outdir" >&2
exit 1
