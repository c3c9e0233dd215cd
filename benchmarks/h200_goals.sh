#!/usr/bin/env bash
# The H200 measurements behind issues 33-35 (run cost, energy, interleaved), each step a folder
# under results/h200/ with its manifest, in the order a lease can afford them:
#   bash benchmarks/h200_goals.sh STEP...     # e.g. chunk-study in-process-fabric
# Folders are named by the step and the UTC day (DAY=YYYY-MM-DD to choose), so that a step run
# on another day leaves the earlier folder as it was, under results/h200/ (MACHINE=h100: under
# results/h100/, for the same steps on an H100).
# Steps (GPU-bound = bf16, channels_last, 256 images per GPU; original = 32/GPU, NCHW, bf16):
#   chunk-study        SD of adjacent-chunk log ratios for each K and pairing, one process
#   in-process-fabric  original workload, Fabric vs native interleaved, 6 processes (the unit)
#   in-process-aa      the same design, native vs native (the A/A)
#   in-process-aa-fabric  the same design, Fabric vs Fabric
#   in-process-gpu     GPU-bound, Fabric vs native in one process (against the separate +2%)
#   in-process-side-gpu  GPU-bound, native on the side stream vs native in one process
#   original-noise     original workload, native vs Fabric in separate processes, telemetry on
#   demo               tools/demo.sh: native vs Trainer, forked, adaptive to +-0.5 pp
#   run-cost-forked    GPU-bound, native, Fabric, Trainer forked from warm interpreters
#   run-cost-fresh     GPU-bound, native, Fabric, Trainer each a fresh process, none profiled
#   fork-check         GPU-bound, native fresh vs native forked (the A/A of forking), 5 blocks
#   energy             GPU-bound, 200 timed steps: J/image of native, Fabric, Trainer, after
#                      settling (host and GPU temperature), up to 7 blocks in 9 minutes
#   gpu-tests          the GPU-marked tests: telemetry, the interleaved mode, both workloads
#   gpt-tests          the GPU-marked tests of the gpt workload alone (tests/test_gpu.py -k gpt)
#   ablation-tests     the GPU-marked tests of the one-GPU ablations (tests/test_gpu.py)
#   gpt                the gpt workload (GPT-2 small, bf16, 8 sequences): native, Fabric, the
#                      Trainer by Stein's rule to +-0.5 pp within 5 minutes (plan gpt)
#   gpt-compiled       the same, every arm compiled (torch.compile before the DDP wrapper, one
#                      compile cache for the experiment)
#   image-compiled     GPU-bound ResNet-50, native, Fabric, the Trainer compiled, to +-0.5 pp
#                      within 5 minutes (plan arms, variant gpu-bound-compiled)
#   gpt-eager-native   three eager native gpt runs (fresh processes), for compiled tokens/s
#                      against eager on the same machine
#   responsibilities-gpt, responsibilities-image, responsibilities-gpt-compiled
#                      one variant of the responsibilities plan (native, Fabric, the Trainer,
#                      its services, Fabric's ablations), up to REPEATS blocks (default 10)
#                      within 8.5 minutes
#   trainer-jumps      GPT-2 small, 200 timed steps a run: native, Fabric, the Trainer and the
#                      Trainer on the current stream, 3 blocks, for steps that jump mid-run
#                      (each run's allocator round trips, context switches and clocks say why)
# Each step is bounded (its own budget flags, then `timeout`); a step that fails is logged and
# the next one runs. With OUT set (the device tool), the folders this call wrote and the step log
# are packed into $OUT/h200.tgz after every step, so what finished comes back even if the call
# is cut. MACHINE (h200 or h100) names the folder; unset, it is read from the GPU's name.
set -uo pipefail
PY=${PY:-python3}
if [ -z "${MACHINE:-}" ]; then
  case $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1) in
    *H100*) MACHINE=h100 ;;
    *) MACHINE=h200 ;;
  esac
fi
d=results/$MACHINE  # an H100's folders apart from an H200's
day=${DAY:-$(date -u +%F)}
log=${OUT:-/tmp}/steps.log
since=$(mktemp)  # what this call wrote is newer than this file
mkdir -p "$d"
gpu=(--devices 1 --batch-size-per-device 256 --precision bf16 --channels-last)
# issue 45's design: 6 processes (the plan's default), each 2 runs of 50 pairs of 2-step chunks
proc=(--devices 1 --runs 2 --pairs 50)
orig=(--devices 1 --batch-size-per-device 32 --precision bf16 --warmup-steps 50 --steps 200)

step() {  # step NAME SECONDS COMMAND...: run it bounded, log its outcome and duration
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  echo "== $name (limit ${limit}s): $*" | tee -a "$log"
  timeout -k 15 "$limit" "$@" 2>&1 | tail -n 40
  rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc after $((SECONDS - t0))s" | tee -a "$log"
  # the services arm's checkpoints stay behind: GPT-2 small's is over a GiB a run
  if [ -n "${OUT:-}" ]; then
    find "$d" -type f -newer "$since" ! -name "*.ckpt" -print0 \
      | tar czf "$OUT/h200.tgz" --null -T - "$log"
  fi
}

for s in "$@"; do
  case $s in
    chunk-study) step "$s" 170 "$PY" -m benchmarks.chunk_study --precision bf16 \
      --warmup-steps 50 --output "$d"/in-process/chunk-study-"$day".json ;;
    in-process-fabric) step "$s" 330 "$PY" -m experiment --plan in-process \
      --variant fabric-vs-native --out "$d"/in-process/original-"$day" -- "${proc[@]}" ;;
    in-process-aa) step "$s" 330 "$PY" -m experiment --plan in-process \
      --variant a-a-native --out "$d"/in-process/original-a-a-"$day" -- "${proc[@]}" ;;
    in-process-aa-fabric) step "$s" 330 "$PY" -m experiment --plan in-process \
      --variant a-a-fabric --out "$d"/in-process/original-a-a-fabric-"$day" -- "${proc[@]}" ;;
    in-process-gpu) step "$s" 150 "$PY" -m experiment --plan in-process \
      --variant gpu-bound --out "$d/in-process/gpu-bound-$day" -- --devices 1 --pairs 40 --runs 6 ;;
    in-process-side-gpu) step "$s" 150 "$PY" -m experiment --plan in-process \
      --variant native-side-stream --out "$d"/in-process/gpu-bound-side-"$day" -- --devices 1 \
      --batch-size-per-device 256 --channels-last --pairs 40 --runs 6 ;;
    original-noise) step "$s" 245 "$PY" -m experiment --arms native,fabric --repeats 5 \
      --settle-minutes 0 --budget-minutes 3.8 --out "$d"/telemetry/original-workload-"$day" \
      -- "${orig[@]}" ;;
    demo) step "$s" 180 env PY="$PY" tools/demo.sh
      mkdir -p "$d/demo" && mv out/demo-* "$d/demo/" ;;
    run-cost-forked) step "$s" 170 "$PY" -m experiment --arms native,fabric,lightning \
      --repeats 3 --settle-minutes 0 --launch fork --out "$d/run-cost/forked-$day" -- "${gpu[@]}" ;;
    run-cost-fresh) step "$s" 150 "$PY" -m experiment --arms native,fabric,lightning \
      --repeats 1 --warmup-runs 0 --settle-minutes 0 --launch fresh \
      --out "$d"/run-cost/fresh-"$day" -- "${gpu[@]}" --profile-steps 0 ;;
    fork-check) step "$s" 240 "$PY" -m experiment --plan fork-check --variant gpu-bound \
      --repeats 5 --settle-minutes 0 --out "$d"/fork-check-"$day" -- --devices 1 ;;
    energy) step "$s" 570 "$PY" -m experiment --arms native,fabric,lightning --repeats 7 \
      --settle-minutes 3 --budget-minutes 9 --out "$d"/energy/gpu-bound-"$day" -- "${gpu[@]}" \
      --warmup-steps 20 --steps 200 ;;
    gpu-tests) step "$s" 240 "$PY" -m pytest -q -m gpu tests/test_telemetry.py \
      tests/test_interleaved.py tests/test_gpu.py --junit-xml "$d/test-gpu-$day.xml" ;;
    gpt-tests) step "$s" 150 "$PY" -m pytest -q -m gpu tests/test_gpu.py -k gpt \
      --junit-xml "$d/test-gpu-gpt-$day.xml" ;;
    ablation-tests) step "$s" 150 "$PY" -m pytest -q -m gpu tests/test_gpu.py -k ablations \
      --junit-xml "$d/test-gpu-ablations-$day.xml" ;;
    gpt | gpt-compiled) step "$s" 330 "$PY" -m experiment --plan gpt \
      --variant "gpu-bound${s#gpt}" --target-half-width 0.5 --budget-minutes 5 \
      --settle-minutes 1 --out "$d/$s-$day" -- --devices 1 ;;
    image-compiled) step "$s" 330 "$PY" -m experiment --plan arms --variant gpu-bound-compiled \
      --target-half-width 0.5 --budget-minutes 5 --settle-minutes 1 --out "$d/$s-$day" \
      -- --devices 1 ;;
    gpt-eager-native) mkdir -p "$d/$s-$day"
      for k in 1 2 3; do
        step "$s" 90 "$PY" -m native --devices 1 --workload gpt --precision bf16 \
          --batch-size-per-device 8 --warmup-steps 20 --steps 60 \
          --output "$d/$s-$day/native-r$k.json"
      done ;;
    responsibilities-gpt | responsibilities-image | responsibilities-gpt-compiled)
      step "$s" 540 "$PY" -m experiment --plan responsibilities \
      --variant "${s#responsibilities-}" --repeats "${REPEATS:-10}" --settle-minutes 0 \
      --budget-minutes 8.5 --out "$d/$s-$day" -- --devices 1 ;;
    trainer-jumps) step "$s" 200 "$PY" -m experiment \
      --arms native,fabric,lightning,lightning-current-stream --repeats 3 --settle-minutes 0 \
      --budget-minutes 3 --out "$d/$s-$day" -- --devices 1 --workload gpt --precision bf16 \
      --batch-size-per-device 8 --warmup-steps 15 --steps 200 ;;
    *) echo "h200_goals: no step '$s' (see the list at the top of $0)" >&2; exit 2 ;;
  esac
done
