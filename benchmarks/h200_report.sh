#!/usr/bin/env bash
# Rebuild the reports and plots in results/h200/ from the result files there.
#   bash benchmarks/h200_report.sh
set -euo pipefail
PY=${PY:-.venv/bin/python}
d=results/h200
report() {  # report NAME FILES...: markdown report + plot, replacing the previous ones
  local name=$1; shift
  "$PY" -m compare "$@" --format markdown --output "$d/report-$name.md" --plot "$d/plot-$name.png" --overwrite-output
}
report bf16-cl-b256 $d/native-bf16-cl-b256-r{1,2}.json $d/lightning-bf16-cl-b256-r{1,2}.json
report bf16-cl-b256-compile $d/native-bf16-cl-b256-compile-r{1,2}.json $d/lightning-bf16-cl-b256-compile-r{1,2}.json
report bf16-cl-b256-compile-reduce-overhead $d/native-bf16-cl-b256-compile-reduce-overhead{,-r2}.json \
  $d/lightning-bf16-cl-b256-compile-reduce-overhead{,-r2}.json
report bf16-cl-b256-fused $d/native-bf16-cl-b256-fused.json $d/lightning-bf16-cl-b256-fused.json
report defaults $d/native-defaults-r{1,2}.json $d/lightning-defaults-r{1,2}.json
for p in fp32 tf32 fp16; do
  report "$p-cl-b256" "$d/native-$p-cl-b256.json" "$d/lightning-$p-cl-b256.json"
done
# Each runner with its own DDP stream and with the other's (the `stream` and `stream-compile` parts).
s=$d/stream
report stream-bf16-own $s/native-bf16-cl-b256-r{1,2}.json $s/lightning-bf16-cl-b256-r{1,2}.json
report stream-bf16-both-current $s/native-bf16-cl-b256-r{1,2}.json $s/lightning-current-stream-bf16-cl-b256-r{1,2}.json
report stream-bf16-both-side $s/native-side-stream-bf16-cl-b256-r{1,2}.json $s/lightning-bf16-cl-b256-r{1,2}.json
report stream-fp16-own $s/native-fp16-cl-b256-r1.json $s/lightning-fp16-cl-b256-r1.json
report stream-fp16-both-current $s/native-fp16-cl-b256-r1.json $s/lightning-current-stream-fp16-cl-b256-r1.json
report stream-compile-own $s/native-bf16-cl-b256-compile.json $s/lightning-bf16-cl-b256-compile.json
report stream-compile-both-current $s/native-bf16-cl-b256-compile.json $s/lightning-current-stream-bf16-cl-b256-compile.json
# Where each runner's host time per step goes (cProfile dumps of the `host` part).
"$PY" benchmarks/host_profile.py $d/pyprofile/native-bf16-cl-b256.pstats $d/pyprofile/lightning_impl-bf16-cl-b256.pstats \
  --top 25 > $d/host-profile-bf16-cl-b256.md
# The traces' summaries (the `idle` and `stream-trace` parts wrote them first; ties now sort by name).
t=$d/trace
"$PY" benchmarks/trace_gaps.py $t/native-bf16-cl-b256.trace.json.gz $t/lightning_impl-bf16-cl-b256.trace.json.gz \
  --top 15 > $t/trace-gaps-bf16-cl-b256.md
"$PY" benchmarks/trace_gaps.py $t/native-fp16-cl-b256.trace.json.gz $t/lightning_impl-fp16-cl-b256.trace.json.gz \
  --top 15 > $t/trace-gaps-fp16-cl-b256.md
"$PY" benchmarks/trace_gaps.py $t/native-side-stream-bf16-cl-b256.trace.json.gz \
  $t/lightning_impl-current-stream-bf16-cl-b256.trace.json.gz --top 15 > $t/trace-gaps-swapped-streams-bf16-cl-b256.md
