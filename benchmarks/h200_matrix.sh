#!/usr/bin/env bash
# The H200 measurements behind results/h200/ (issue: performance on a real GPU).
#
#   bash benchmarks/h200_matrix.sh eager   RESULTS_DIR    # harness check, eager pairs, precisions, defaults
#   bash benchmarks/h200_matrix.sh compile RESULTS_DIR    # torch.compile variants and optimizer kernels
#   bash benchmarks/h200_matrix.sh compile2 RESULTS_DIR   # cuDNN autotuning off, reduce-overhead, compiled repeat L N
#
# Every pair alternates the order (N L L N) so that drift in clocks or temperature
# cannot favour one runner. A failed run is logged and the others go on.
set -uo pipefail
part=${1:?eager|compile|compile2}
out=${2:?results folder}
mkdir -p "$out"
python=${PYTHON:-python3}
B256=(--batch-size-per-device 256 --precision bf16 --channels-last)

run() {  # run IMPL NAME ARGS...: one runner, one result file, a log line either way
  local impl=$1 name=$2; shift 2
  echo "=== $impl $name: $*"
  if ! "$python" -m "$impl" "$@" --output "$out/$name.json"; then
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
    ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv
