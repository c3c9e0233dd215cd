#!/usr/bin/env bash
# make demo: a paired experiment (python -m experiment) of native and Lightning on this machine.
#   GPUs present: every visible GPU, bf16, channels_last, 256 images per device (the GPU, not
#   the host, sets the pace); one warm-up run per arm and no settling runs (settling compares
#   two or more baseline warm-up runs, one more run's cost, and GPU-bound runs are paced by
#   the GPU); adaptive: blocks until the overhead's 95% interval is within +-0.5 percentage
#   points (Stein's rule, first stage 5 blocks), at most 2.5 minutes from the start (the
#   runners' checks, the fork servers' imports and the warm-up runs included; no block starts
#   that would end past it; the reports follow).
#   No GPU: 2 gloo ranks on a small CPU configuration, one warm-up run per arm, then 3 blocks
#   (8 runs): `time make demo` took 1 min 51 s on the 2-core development machine, installed
#   (native about 9 s a run, Lightning about 14 s).
# Results, logs, manifest, report and plot land in out/demo-<UTC time>/ (never overwriting).
set -euo pipefail
PY=${PY:-.venv/bin/python}
out=out/demo-$(date -u +%Y%m%d-%H%M%S)
gpus=$("$PY" -c "from common.gpus import cuda_capabilities as c; print(len(c() or []))")  # no torch
if (( gpus > 0 )); then
  plan=(--target-half-width 0.5 --warmup-runs 1 --settle-minutes 0 --budget-minutes 2.5)
  args=(--devices "$gpus" --batch-size-per-device 256 --precision bf16 --channels-last)
else
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  plan=(--repeats 3 --settle-minutes 0)  # a shared 2-core host never settles to 1.5%
  args=(--accelerator cpu --devices 2 --image-size 64 --batch-size-per-device 4 --warmup-steps 2 --steps 5)
fi
echo "demo: ${gpus} GPU(s); results in $out"
exec "$PY" -m experiment --arms native,lightning "${plan[@]}" --out "$out" -- "${args[@]}"
