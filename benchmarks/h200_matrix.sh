#!/usr/bin/env bash
# The H200 measurements behind results/h200/ (issue: performance on a real GPU).
#
#   bash benchmarks/h200_matrix.sh eager   RESULTS_DIR    # harness check, eager pairs, precisions, defaults
#   bash benchmarks/h200_matrix.sh compile RESULTS_DIR    # torch.compile variants and optimizer kernels
#   bash benchmarks/h200_matrix.sh compile2 RESULTS_DIR   # cuDNN autotuning off, reduce-overhead, compiled repeat L N
#   bash benchmarks/h200_matrix.sh compile3 RESULTS_DIR   # max-autotune (bounded), reduce-overhead repeat, compiled fused SGD
#   bash benchmarks/h200_matrix.sh host RESULTS_DIR       # where each runner's host time per step goes (cProfile)
#   bash benchmarks/h200_matrix.sh delay RESULTS_DIR      # does 1 or 2 ms of extra host work per step lengthen it? (DELAYS_US)
#   bash benchmarks/h200_matrix.sh idle RESULTS_DIR       # where Lightning's extra GPU idle time comes from (traces)
#   bash benchmarks/h200_matrix.sh stream RESULTS_DIR     # each runner with the other's DDP stream (bf16, fp16)
#   bash benchmarks/h200_matrix.sh stream-compile RESULTS_DIR  # the same swap, compiled
#   bash benchmarks/h200_matrix.sh stream-trace RESULTS_DIR  # traces of the swapped runs, vs the idle part's
#
# Every pair alternates the order (N L L N) so that drift in clocks or temperature
# cannot favour one runner. A failed run is logged and the others go on.
set -uo pipefail
part=${1:?eager|compile|compile2|compile3|host|delay|idle|stream|stream-compile|stream-trace}
out=${2:?results folder}
mkdir -p "$out"
python=${PYTHON:-python3}
B256=(--batch-size-per-device 256 --precision bf16 --channels-last)

run() {  # run IMPL NAME ARGS...: one runner, one result file, a log line either way
  local impl=$1 name=$2; shift 2
  echo "=== $impl $name: $*"
  # RUN_TIMEOUT (seconds) bounds one run; the runner stops on SIGTERM and writes nothing.
  if ! timeout "${RUN_TIMEOUT:-0}" "$python" -m "$impl" "$@" --output "$out/$name.json"; then
    echo "FAILED: $impl $name"
  fi
}

pair() {  # pair NAME ARGS...: native and Lightning twice, order N L L N
  local name=$1; shift
  run native "native-$name-r1" "$@"
  run lightning_impl "lightning-$name-r1" "$@"
  run lightning_impl "lightning-$name-r2" "$@"
  run native "native-$name-r2" "$@"
}

stream_run() {  # stream_run N|L|Ns|Lc PRECISION TAG [ARGS]: a runner with its own or the other's DDP stream
  local p=$2 r=$3
  local args=(--batch-size-per-device 256 --precision "$p" --channels-last "${@:4}")
  case $1 in
    N) run native "stream/native-$p-cl-b256-$r" "${args[@]}" ;;
    L) run lightning_impl "stream/lightning-$p-cl-b256-$r" "${args[@]}" ;;
    Ns) DDPBENCH_DDP_STREAM=side run native "stream/native-side-stream-$p-cl-b256-$r" "${args[@]}" ;;
    Lc) DDPBENCH_DDP_STREAM=current run lightning_impl "stream/lightning-current-stream-$p-cl-b256-$r" "${args[@]}" ;;
  esac
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
case $part in
  eager)
    # Harness check: the smallest loop doing the same work, in the same job on the same GPU.
    "$python" benchmarks/minimal_loop.py --batch 256 --precision bf16 --channels-last --output "$out/minimal-loop-bf16-cl-b256.json"
    pair bf16-cl-b256 "${B256[@]}"
    "$python" benchmarks/minimal_loop.py --batch 256 --precision bf16 --channels-last --output "$out/minimal-loop-bf16-cl-b256-after.json"
    # The original scripts' defaults: 32 images per device, NCHW, auto precision (host-bound).
    pair defaults
    for p in fp32 tf32 fp16; do
      run native "native-$p-cl-b256" --batch-size-per-device 256 --precision "$p" --channels-last
      run lightning_impl "lightning-$p-cl-b256" --batch-size-per-device 256 --precision "$p" --channels-last
    done
    ;;
  compile)
    # Is Lightning's side-stream DDP construction a per-step cost? Same loop, both ways.
    "$python" benchmarks/minimal_loop.py --batch 256 --precision bf16 --channels-last \
      --variants plain,ddp,ddp-side-stream --output "$out/minimal-loop-side-stream.json"
    run native native-bf16-cl-b256-compile-r1 "${B256[@]}" --compile --warmup-steps 20
    run lightning_impl lightning-bf16-cl-b256-compile-r1 "${B256[@]}" --compile --warmup-steps 20
    run native native-bf16-cl-b256-fused "${B256[@]}" --sgd-impl fused
    run lightning_impl lightning-bf16-cl-b256-fused "${B256[@]}" --sgd-impl fused
    run native native-bf16-cl-b256-compile-fused "${B256[@]}" --compile --warmup-steps 20 --sgd-impl fused
    ;;
  compile2)
    run native native-bf16-cl-b256-no-cudnn-benchmark "${B256[@]}" --no-cudnn-benchmark
    # CUDA graphs: Inductor's perf hints say whether (and why) it skips them.
    TORCH_LOGS=perf_hints run native native-bf16-cl-b256-compile-reduce-overhead "${B256[@]}" --compile \
      --warmup-steps 20 --compile-mode reduce-overhead
    run lightning_impl lightning-bf16-cl-b256-compile-r2 "${B256[@]}" --compile --warmup-steps 20
    run native native-bf16-cl-b256-compile-r2 "${B256[@]}" --compile --warmup-steps 20
    TORCH_LOGS=perf_hints run lightning_impl lightning-bf16-cl-b256-compile-reduce-overhead "${B256[@]}" --compile \
      --warmup-steps 20 --compile-mode reduce-overhead
    ;;
  compile3)
    # max-autotune benchmarks Triton kernels for every fused op at compile time: bounded here.
    RUN_TIMEOUT=330 run native native-bf16-cl-b256-compile-max-autotune "${B256[@]}" --compile \
      --warmup-steps 20 --compile-mode max-autotune
    RUN_TIMEOUT=180 run lightning_impl lightning-bf16-cl-b256-compile-max-autotune "${B256[@]}" --compile \
      --warmup-steps 20 --compile-mode max-autotune
    run lightning_impl lightning-bf16-cl-b256-compile-reduce-overhead-r2 "${B256[@]}" --compile --warmup-steps 20 \
      --compile-mode reduce-overhead
    run native native-bf16-cl-b256-compile-reduce-overhead-r2 "${B256[@]}" --compile --warmup-steps 20 \
      --compile-mode reduce-overhead
    run lightning_impl lightning-bf16-cl-b256-compile-fused "${B256[@]}" --compile --warmup-steps 20 --sgd-impl fused
    ;;
  delay)
    # Native with a busy host spin of N us per step, standing in for a framework's per-step work.
    mkdir -p "$out/host-delay"
    for us in ${DELAYS_US:-0 1000 2000}; do
      DDPBENCH_HOST_DELAY_US=$us run native "host-delay/native-bf16-cl-b256-host-delay-$us" "${B256[@]}"
    done
    ;;
  idle)
    # One Chrome trace per runner and precision (host and GPU activity in the profiled steps),
    # summarised by benchmarks/trace_gaps.py; then native's host slack at 3-4 ms and Lightning's
    # own slack (is its step host-bound at all?).
    mkdir -p "$out/trace" "$out/host-delay"
    for p in bf16 fp16; do
      for impl in native lightning_impl; do
        DDPBENCH_TRACE="$out/trace/$impl-$p-cl-b256.trace.json" run "$impl" "trace/$impl-$p-cl-b256" \
          --batch-size-per-device 256 --precision "$p" --channels-last --profile-steps 3
      done
      "$python" benchmarks/trace_gaps.py "$out/trace/native-$p-cl-b256.trace.json" \
        "$out/trace/lightning_impl-$p-cl-b256.trace.json" --top 15 | tee "$out/trace/trace-gaps-$p-cl-b256.md"
      gzip -f "$out/trace/"*"-$p-cl-b256.trace.json"
    done
    for us in 3000 4000; do
      DDPBENCH_HOST_DELAY_US=$us run native "host-delay/native-bf16-cl-b256-host-delay-$us" "${B256[@]}"
    done
    for us in 0 2000; do
      DDPBENCH_HOST_DELAY_US=$us run lightning_impl "host-delay/lightning-bf16-cl-b256-host-delay-$us" "${B256[@]}"
    done
    ;;
  stream)
    # Lightning builds DDP on a side stream, native on the current one. Each runner also runs
    # with the other's (DDPBENCH_DDP_STREAM); bf16 in the order N L Ns Lc Lc Ns L N, so that
    # drift favours none, then one fp16 round.
    mkdir -p "$out/stream"
    for k in N L Ns Lc; do stream_run "$k" bf16 r1; done
    for k in Lc Ns L N; do stream_run "$k" bf16 r2; done
    for k in N L Ns Lc; do stream_run "$k" fp16 r1; done
    ;;
  stream-compile)
    # The same swap, compiled (default mode), order N L Lc Ns.
    mkdir -p "$out/stream"
    for k in N L Lc Ns; do stream_run "$k" bf16 compile --compile --warmup-steps 20; done
    ;;
  stream-trace)
    # The swapped runs' traces, read against the idle part's traces of the runners' own way.
    mkdir -p "$out/trace"
    DDPBENCH_DDP_STREAM=side DDPBENCH_TRACE="$out/trace/native-side-stream-bf16-cl-b256.trace.json" \
      run native trace/native-side-stream-bf16-cl-b256 "${B256[@]}" --profile-steps 3
    DDPBENCH_DDP_STREAM=current DDPBENCH_TRACE="$out/trace/lightning_impl-current-stream-bf16-cl-b256.trace.json" \
      run lightning_impl trace/lightning_impl-current-stream-bf16-cl-b256 "${B256[@]}" --profile-steps 3
    "$python" benchmarks/trace_gaps.py "$out/trace/native-side-stream-bf16-cl-b256.trace.json" \
      "$out/trace/lightning_impl-current-stream-bf16-cl-b256.trace.json" --top 15 \
      | tee "$out/trace/trace-gaps-swapped-streams-bf16-cl-b256.md"
    gzip -f "$out/trace/"*-stream-bf16-cl-b256.trace.json
    ;;
  host)
    # Diagnostic runs (cProfile slows Python): their result files go to a folder of their own,
    # as do the host-delay and trace runs.
    mkdir -p "$out/pyprofile"
    for impl in native lightning_impl; do
      DDPBENCH_PYPROFILE="$out/pyprofile/$impl-bf16-cl-b256.pstats" \
        run "$impl" "pyprofile/$impl-bf16-cl-b256" "${B256[@]}"
    done
    "$python" benchmarks/host_profile.py "$out/pyprofile/native-bf16-cl-b256.pstats" \
      "$out/pyprofile/lightning_impl-bf16-cl-b256.pstats" --top 25 | tee "$out/host-profile-bf16-cl-b256.md"
    ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv
