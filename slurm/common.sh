# shellcheck shell=bash
# Shared by run.sbatch, pair.sbatch and compare.sbatch (sourced, never run): reads the
# job's shape from Slurm, checks it, and builds the runner options both implementations get.
#
# The allocation is the one source of truth: --devices comes from the tasks per node and
# --num-nodes from the node count, and the GPUs held must equal the tasks per node, so the
# #SBATCH lines, the GPU request and the runner options cannot disagree.
#
# Variables read (all optional):
#   PYTHON        python with this suite's requirements     (default python3)
#   ACCELERATOR   gpu | cpu                                 (default gpu)
#   DEVICES       expected tasks per node: only checked     (default: the job's)
#   NODES         expected node count: only checked         (default: the job's)
#   BATCH_MODE    weak (--batch-size-per-device) | strong (--global-batch-size)  (default weak)
#   BATCH_SIZE    images per device (weak) or per step (strong)  (weak default: the runner's)
#   PRECISION, WARMUP_STEPS, STEPS   passed as --precision, --warmup-steps, --steps
#   EXTRA_ARGS    more runner options, split at spaces (script arguments are added after it)
#   OUTDIR        the job's folder            (default results/slurm-<job name>-<job id>)

# The script that sourced us names itself in messages.
BENCH_PROG=${BENCH_PROG:-$(basename "${BASH_SOURCE[1]:-slurm}")}

# die MESSAGE: one line on stderr, exit 2 (a usage error, like the runners' own).
die() {
  echo "$BENCH_PROG: error: $*" >&2
  exit 2
}

# say MESSAGE: progress for the Slurm log.
say() {
  echo "$BENCH_PROG: $*"
}

# gpu_count SPEC: the number in a GPU request such as "4", "a100:4" or "gpu:a100:4".
gpu_count() {
  local n=${1##*:}
  [[ $n =~ ^[0-9]+$ ]] || die "cannot read a GPU count from '$1'"
  echo "$n"
}

# bench_job_shape: set DEVICES_PER_NODE and NUM_NODES from the allocation and check that
# DEVICES / NODES, if given, agree with it.
bench_job_shape() {
  [[ -n ${SLURM_JOB_ID:-} ]] || die "not inside a Slurm job; submit this script with sbatch"
  # Lightning ignores Slurm in jobs named bash or interactive and would start its own
  # processes inside every srun task.
  case ${SLURM_JOB_NAME:-} in
    bash|interactive) die "a job named '$SLURM_JOB_NAME' is not seen as a Slurm job by Lightning; submit with another --job-name" ;;
  esac

  local per_node=${SLURM_NTASKS_PER_NODE:-}
  if [[ -z $per_node ]]; then
    # Without --ntasks-per-node only SLURM_TASKS_PER_NODE exists, e.g. "4(x2)" or "3,1".
    per_node=${SLURM_TASKS_PER_NODE:-1}
    per_node=${per_node%%(x*)}
    [[ $per_node =~ ^[0-9]+$ ]] \
      || die "tasks are spread unevenly over the nodes (SLURM_TASKS_PER_NODE=$SLURM_TASKS_PER_NODE); submit with --ntasks-per-node"
  fi
  DEVICES_PER_NODE=$per_node
  NUM_NODES=${SLURM_NNODES:-${SLURM_JOB_NUM_NODES:-1}}
  local ntasks=${SLURM_NTASKS:-$DEVICES_PER_NODE}
  (( ntasks == DEVICES_PER_NODE * NUM_NODES )) \
    || die "the job has $ntasks tasks, not $DEVICES_PER_NODE per node x $NUM_NODES nodes; submit with --ntasks-per-node and --nodes, not --ntasks"

  if [[ -n ${DEVICES:-} && $DEVICES != "$DEVICES_PER_NODE" ]]; then
    die "DEVICES=$DEVICES but the job runs $DEVICES_PER_NODE tasks per node; #SBATCH lines cannot read variables, so submit with sbatch --ntasks-per-node=$DEVICES --gpus-per-node=$DEVICES"
  fi
  if [[ -n ${NODES:-} && $NODES != "$NUM_NODES" ]]; then
    die "NODES=$NODES but the job has $NUM_NODES nodes; submit with sbatch --nodes=$NODES"
  fi
}

# bench_check_gpus: the GPUs the job holds per node must equal its tasks per node (one GPU
# per rank), and none may be held for a CPU run.
bench_check_gpus() {
  local requested="" visible=""
  # SLURM_GPUS_PER_NODE is the --gpus-per-node request as typed (e.g. "a100:4"; also set for
  # --gpus-per-node=0); SLURM_GPUS_ON_NODE counts the GPUs on this node for other request
  # forms (--gres=gpu:4). The request comes first: an --exclusive job may be given more.
  if [[ -n ${SLURM_GPUS_PER_NODE:-} ]]; then
    requested=$(gpu_count "$SLURM_GPUS_PER_NODE")
  elif [[ -n ${SLURM_GPUS_ON_NODE:-} ]]; then
    requested=$SLURM_GPUS_ON_NODE
  fi
  if [[ -n ${SLURM_GPUS_PER_TASK:-} ]]; then
    die "--gpus-per-task hides the other GPUs of the node from each rank; request --gpus-per-node=$DEVICES_PER_NODE instead"
  fi
  case $ACCELERATOR in
    cpu)
      if [[ -n $requested ]] && (( requested > 0 )); then
        die "ACCELERATOR=cpu but the job holds $requested GPU(s) per node; submit with sbatch --gpus-per-node=0"
      fi
      ;;
    gpu)
      if [[ $requested == 0 ]]; then
        die "the job holds no GPUs (--gpus-per-node=0); set ACCELERATOR=cpu for a CPU run or request GPUs"
      fi
      if [[ -n $requested ]] && (( requested != DEVICES_PER_NODE )); then
        die "the job holds $requested GPU(s) per node but runs $DEVICES_PER_NODE tasks per node; submit with sbatch --ntasks-per-node=N --gpus-per-node=N (the same N)"
      fi
      # Slurm lists the GPUs it gives the job in CUDA_VISIBLE_DEVICES; without a GPU
      # request ask the driver.
      if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
        local ids
        IFS=, read -ra ids <<<"$CUDA_VISIBLE_DEVICES"
        visible=${#ids[@]}
      elif command -v nvidia-smi >/dev/null; then
        visible=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
      fi
      if [[ -n $visible ]] && (( visible < DEVICES_PER_NODE )); then
        die "$DEVICES_PER_NODE tasks per node but only $visible GPU(s) visible on $(hostname -s) (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}); request --gpus-per-node=$DEVICES_PER_NODE"
      fi
      ;;
  esac
}

# bench_environment: what every rank inherits from the batch shell.
bench_environment() {
  # No MASTER_PORT here: both runners derive it from the job id by Lightning's rule
  # (common.launcher.slurm_master_port) and keep one the user set; rank 0 refuses, naming
  # the port, when another job on the node already listens there.
  # One intra-op thread pool per rank that fits in the rank's CPUs; both runners keep an
  # OMP_NUM_THREADS they inherit, so they get the same value.
  local cpus=${SLURM_CPUS_ON_NODE:-$(nproc)}
  if [[ -n ${SLURM_CPUS_PER_TASK:-} ]]; then
    OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
    # Since Slurm 22.05 srun no longer reads SLURM_CPUS_PER_TASK; without this, every
    # task would be bound to a single CPU.
    export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK
  else
    OMP_NUM_THREADS=$(( cpus / DEVICES_PER_NODE ))
  fi
  (( OMP_NUM_THREADS >= 1 )) || OMP_NUM_THREADS=1
  export OMP_NUM_THREADS
  # Logs show progress as it happens, not when a buffer fills.
  export PYTHONUNBUFFERED=1
}

# bench_runner_args [EXTRA...]: set RUNNER_ARGS, the options both implementations get.
bench_runner_args() {
  local extra=() arg
  read -ra extra <<<"${EXTRA_ARGS:-}"
  extra+=("$@")
  for arg in "${extra[@]}"; do
    case $arg in
      --devices|--devices=*|--num-nodes|--num-nodes=*)
        die "$arg comes from the allocation; change --ntasks-per-node/--gpus-per-node/--nodes of sbatch instead" ;;
      --accelerator|--accelerator=*) die "$arg: set ACCELERATOR=gpu|cpu instead" ;;
      --output|--output=*|--overwrite-output) die "$arg: results go to OUTDIR; set OUTDIR instead" ;;
    esac
  done
  RUNNER_ARGS=(--devices "$DEVICES_PER_NODE" --num-nodes "$NUM_NODES" --accelerator "$ACCELERATOR")
  case ${BATCH_MODE:-weak} in
    weak) [[ -z ${BATCH_SIZE:-} ]] || RUNNER_ARGS+=(--batch-size-per-device "$BATCH_SIZE") ;;
    strong)
      [[ -n ${BATCH_SIZE:-} ]] || die "BATCH_MODE=strong needs BATCH_SIZE (the global batch, images per step)"
      RUNNER_ARGS+=(--global-batch-size "$BATCH_SIZE") ;;
    *) die "BATCH_MODE=$BATCH_MODE: use weak (fixed batch per device) or strong (fixed global batch)" ;;
  esac
  [[ -z ${PRECISION:-} ]] || RUNNER_ARGS+=(--precision "$PRECISION")
  [[ -z ${WARMUP_STEPS:-} ]] || RUNNER_ARGS+=(--warmup-steps "$WARMUP_STEPS")
  [[ -z ${STEPS:-} ]] || RUNNER_ARGS+=(--steps "$STEPS")
  # Last, so that an option given here wins over the variables above.
  RUNNER_ARGS+=("${extra[@]}")
}

# bench_setup [EXTRA...]: everything above, then cd to the repository so `python -m` finds
# the packages. Sets BENCH_OUTDIR (absolute, created) and the variables above.
bench_setup() {
  ACCELERATOR=${ACCELERATOR:-gpu}
  [[ $ACCELERATOR == gpu || $ACCELERATOR == cpu ]] || die "ACCELERATOR=$ACCELERATOR: use gpu or cpu"
  PYTHON=${PYTHON:-python3}
  command -v "$PYTHON" >/dev/null || die "PYTHON=$PYTHON is not a command; point PYTHON at the python of this suite's environment"
  bench_job_shape
  bench_check_gpus
  bench_environment
  bench_runner_args "$@"
  bench_outdir
  cd "$BENCH_ROOT" || die "cannot enter $BENCH_ROOT"
}

# bench_outdir: create the job's folder; a relative OUTDIR is taken from the submit folder.
bench_outdir() {
  local name=${SLURM_JOB_NAME//[^A-Za-z0-9._-]/_}
  BENCH_OUTDIR=${OUTDIR:-$BENCH_ROOT/results/slurm-$name-$SLURM_JOB_ID}
  mkdir -p "$BENCH_OUTDIR"
  BENCH_OUTDIR=$(cd "$BENCH_OUTDIR" && pwd)
}

# bench_header: the job's facts, aligned, at the top of the Slurm log.
bench_header() {
  printf '%-16s %s\n' \
    job "$SLURM_JOB_ID ($SLURM_JOB_NAME) on ${SLURM_JOB_NODELIST:-?}" \
    ranks "$DEVICES_PER_NODE per node x $NUM_NODES node(s), $ACCELERATOR" \
    OMP_NUM_THREADS "$OMP_NUM_THREADS" \
    MASTER_PORT "${MASTER_PORT:-15000 + the job id's last four digits (the runners' rule)}" \
    python "$(command -v "$PYTHON")" \
    repository "$BENCH_ROOT" \
    folder "$BENCH_OUTDIR" \
    options "${RUNNER_ARGS[*]}"
}

# bench_run IMPL JSON [LOG]: run one implementation on every rank; returns srun's status.
# Without LOG the output goes to the job's own log.
bench_run() {
  local module
  case $1 in
    native) module=native ;;
    lightning) module=lightning_impl ;;
    *) die "IMPL=$1: use native or lightning" ;;
  esac
  # --kill-on-bad-exit: one failed rank stops the others at once instead of leaving them
  # blocked in a collective until the process-group timeout.
  local cmd=(srun --kill-on-bad-exit=1 "$PYTHON" -m "$module" "${RUNNER_ARGS[@]}" --output "$2")
  if [[ -n ${3:-} ]]; then
    "${cmd[@]}" >"$3" 2>&1
  else
    "${cmd[@]}"
  fi
}

# bench_compare OUTDIR PLOT FILE...: report.txt, report.md and the plot PLOT in OUTDIR.
bench_compare() {
  local outdir=$1 plot=$2
  shift 2
  "$PYTHON" -m compare "$@" --format text --output "$outdir/report.txt" --plot "$outdir/$plot" \
    && "$PYTHON" -m compare "$@" --format markdown --output "$outdir/report.md"
}

# bench_keep_log OUTDIR: copy the job's own log into OUTDIR (all but what is printed later).
bench_keep_log() {
  local out
  out=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | grep -o 'StdOut=[^ ]*' || true)
  out=${out#StdOut=}
  # Nothing to do when the log was written into the folder in the first place (sweep.sh).
  if [[ -f $out && ! $out -ef $1/job.out ]]; then cp "$out" "$1/job.out"; fi
}
