#!/usr/bin/env bash
# Rebuild the reports, plots and summaries in results/h200/ from the result files there
# (one folder per question; the naming scheme is in results/README.md).
#   PYTHON=.venv/bin/python bash benchmarks/h200_report.sh
set -euo pipefail
PY=${PYTHON:-${PY:-.venv/bin/python}}
d=results/h200
report() {  # report FOLDER NAME FILES...: markdown report + plot, replacing the previous ones
  local dir=$d/$1 name=$2; shift 2
  "$PY" -m compare "$@" --format markdown --output "$dir/report-$name.md" \
    --plot "$dir/plot-$name.png" --overwrite-output
}
p=$d/precisions
report precisions bf16 $p/native-bf16-r{1,2}.json $p/lightning-bf16-r{1,2}.json
for x in fp32 tf32 fp16; do
  report precisions "$x" "$p/native-$x-r1.json" "$p/lightning-$x-r1.json"
done
c=$d/compile-modes
report compile-modes bf16-compile $c/native-bf16-compile-r{1,2}.json \
  $c/lightning-bf16-compile-r{1,2}.json
report compile-modes bf16-reduce-overhead $c/native-bf16-reduce-overhead-r{1,2}.json \
  $c/lightning-bf16-reduce-overhead-r{1,2}.json
o=$d/optimizer-kernels
report optimizer-kernels bf16-fused $o/native-bf16-fused-r1.json $o/lightning-bf16-fused-r1.json
g=$d/original-defaults
report original-defaults defaults $g/native-defaults-r{1,2}.json $g/lightning-defaults-r{1,2}.json
# Each runner with its own DDP stream and with the other's.
s=$d/ddp-stream-swap
report ddp-stream-swap bf16-own $s/native-bf16-r{1,2}.json $s/lightning-bf16-r{1,2}.json
report ddp-stream-swap bf16-both-current $s/native-bf16-r{1,2}.json \
  $s/lightning-bf16-current-stream-r{1,2}.json
report ddp-stream-swap bf16-both-side $s/native-bf16-side-stream-r{1,2}.json \
  $s/lightning-bf16-r{1,2}.json
report ddp-stream-swap fp16-own $s/native-fp16-r1.json $s/lightning-fp16-r1.json
report ddp-stream-swap fp16-both-current $s/native-fp16-r1.json \
  $s/lightning-fp16-current-stream-r1.json
report ddp-stream-swap compile-own $s/native-bf16-compile-r1.json $s/lightning-bf16-compile-r1.json
report ddp-stream-swap compile-both-current $s/native-bf16-compile-r1.json \
  $s/lightning-bf16-compile-current-stream-r1.json
# Where each runner's host time per step goes (cProfile dumps over the timed steps).
h=$d/host-profile
"$PY" benchmarks/host_profile.py $h/native-bf16-r1.pstats $h/lightning-bf16-r1.pstats \
  --top 25 > $h/host-profile-bf16.md
# The Chrome traces' summaries.
t=$d/traces
"$PY" benchmarks/trace_gaps.py $t/native-bf16-r1.trace.json.gz $t/lightning-bf16-r1.trace.json.gz \
  --top 15 > $t/trace-gaps-bf16.md
"$PY" benchmarks/trace_gaps.py $t/native-fp16-r1.trace.json.gz $t/lightning-fp16-r1.trace.json.gz \
  --top 15 > $t/trace-gaps-fp16.md
"$PY" benchmarks/trace_gaps.py $t/native-bf16-side-stream-r1.trace.json.gz \
  $t/lightning-bf16-current-stream-r1.trace.json.gz --top 15 > $t/trace-gaps-swapped-streams-bf16.md
"$PY" benchmarks/trace_gaps.py $t/side-stream-bf16-nchw/traces/native-r1.trace.json.gz \
  $t/side-stream-bf16-nchw/traces/native-side-stream-r1.trace.json.gz --top 15 \
  > $t/trace-gaps-side-stream-bf16-nchw.md
# The experiment folders (python -m experiment): report.txt, .md, .html, comparison.png, drift.png.
for manifest in "$d"/*/*/manifest.json; do
  f=$(dirname "$manifest")
  # compare's options as the experiment passed them: its plan's (--allow-mismatch, say)
  read -ra opts <<<"$("$PY" -c 'import json, sys
from experiment import plans
name = json.load(open(sys.argv[1]))["experiment"] or ""
print("--allow-mismatch" if name and plans.find(name.split("/")[0]).allow_mismatch else "")' "$manifest")"
  "$PY" -m compare "$f" ${opts[@]+"${opts[@]}"} --format text --output "$f/report.txt" \
    --plot "$f/comparison.png" --overwrite-output
  "$PY" -m compare "$f" ${opts[@]+"${opts[@]}"} --format markdown --output "$f/report.md" \
    --overwrite-output
  "$PY" -m compare "$f" ${opts[@]+"${opts[@]}"} --format html --output "$f/report.html" \
    --drift "$f/drift.png" --overwrite-output
done
