#!/usr/bin/env bash
# make demo: native, Lightning, then compare, on this machine.
#   GPUs present: every visible GPU, bf16, channels_last, 256 images per device: settings
#   where the GPU, not the host, sets the pace (see README, "What the numbers measure").
#   No GPU: 2 gloo ranks on a small CPU configuration (under a minute on 2 cores).
# The results, report and plot land in out/demo-<UTC time>/ (never overwriting anything).
set -euo pipefail
PY=${PY:-.venv/bin/python}
out=out/demo-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
gpus=$("$PY" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)")
if (( gpus > 0 )); then
  args=(--devices "$gpus" --batch-size-per-device 256 --precision bf16 --channels-last)
else
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  args=(--accelerator cpu --devices 2 --image-size 64 --batch-size-per-device 4 --warmup-steps 2 --steps 5)
fi
echo "demo: ${gpus} GPU(s); options: ${args[*]}; results in $out"
"$PY" -m native "${args[@]}" --output "$out/native.json"
"$PY" -m lightning_impl "${args[@]}" --output "$out/lightning.json"
"$PY" -m compare "$out/native.json" "$out/lightning.json" --plot "$out/comparison.png" | tee "$out/report.txt"
echo "demo: report $out/report.txt, plot $out/comparison.png"
