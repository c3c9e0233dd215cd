#!/usr/bin/env bash
# Why do gpt step times swing run to run on the H100? Fresh native runs, several settings.
set -u
source tools/install_carried_wheels.sh
o=${OUT:-/tmp}/probe; mkdir -p $o
G=(--devices 1 --workload gpt --precision bf16 --batch-size-per-device 8)
run() { local name=$1; shift; timeout 60 python3 -m native "${G[@]}" "$@" --output $o/$name.json > $o/$name.log 2>&1; echo "$name rc=$?"; }
python3 - <<'PY'
import torch
print("sdp flash", torch.backends.cuda.flash_sdp_enabled(), "mem", torch.backends.cuda.mem_efficient_sdp_enabled(), "cudnn", torch.backends.cuda.cudnn_sdp_enabled(), "math", torch.backends.cuda.math_sdp_enabled())
PY
for k in 1 2 3; do run def-$k --warmup-steps 15 --steps 60; done
for k in 1 2 3; do run nobench-$k --warmup-steps 15 --steps 60 --no-cudnn-benchmark; done
run long-1 --warmup-steps 50 --steps 300
run trace-1 --warmup-steps 15 --steps 60 --profile-steps 5 --trace $o/trace-1.json.gz
python3 -m benchmarks.trace_gaps $o/trace-1.json.gz 2>&1 | tail -25
python3 - <<'PY'
import json, glob, os, statistics as st
o=os.environ.get("OUT","/tmp")+"/probe"
for f in sorted(glob.glob(o+"/*.json")):
    r=json.load(open(f)); s=r["ranks"][0]["step_times_ms"]; h=len(s)//2
    print(os.path.basename(f), "med %.2f"%st.median(s), "p5 %.1f p95 %.1f"%(sorted(s)[len(s)//20], sorted(s)[-len(s)//20-1]), "halves %.2f %.2f"%(st.median(s[:h]), st.median(s[h:])), "host %.2f"%(r.get("host_ms_per_step") or -1), "busy", (r.get("gpu_activity") or {}).get("gpu_busy_share_of_timed_step"), "gpu ms", (r.get("gpu_activity") or {}).get("gpu_busy_ms_per_step"))
PY
tar czf ${OUT:-/tmp}/probe.tgz -C ${OUT:-/tmp} probe/ --exclude='*.gz'
