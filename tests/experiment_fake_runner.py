"""A fake runner for tests/test_experiment.py: `python THIS -m MODULE ... --output PATH`.

Writes a valid result (tests/compare_factory.py) without torch. Environment:
FAKE_ORDER (file: append the run's name), FAKE_FAIL (run names, comma-separated, that exit 3),
FAKE_USAGE (run name that exits 2), FAKE_HANG (run name that sleeps), FAKE_OVERHEAD (% for
lightning, default 2), FAKE_WARMUP_DRIFT (P: the k-th warm-up run is P/k^2 % slower);
FAKE_WARMUP_HEAT (H: a GPU warming up, the k-th warm-up run's window ending at 65 - H/k^2 C,
in whole degrees, every counted run's at 65 C; "endless": at 30 + k C, a GPU that never warms);
FAKE_ORPHAN (run name whose "rank" outlives it and writes the result
later, while the launcher exits 1), FAKE_CHECKS (file: append each --check's module),
FAKE_REFUSE (module whose --check refuses), FAKE_LATE_FAIL (run name that writes its result,
then exits 1), FAKE_PARENTS (file: append "check|run MODULE fresh|forked PARENT-PID" for each
check and run: whose process made it), FAKE_DEAF (run name whose launcher and its one
"rank", both in the run's process group, ignore SIGTERM and sleep: Fabric's rank 0, a rank
blocked in a collective), FAKE_SLOW (run name that sleeps 3 s, then goes on: the disk can
fill meanwhile). For lightning_impl.interleaved it writes tests/data/interleaved.json with the
loop built first (--build-first) and the order seed (--order-seed) as the mode records them,
its arm's chunks slower by FAKE_BUILD_EFFECT (a log ratio) where the arm was built first, and
by a little process noise drawn from the seed.
"""

import math
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_factory import make_result, write  # noqa: E402

args = sys.argv[1:]
module = args[1]
out = Path(args[args.index("--output") + 1] if "--output" in args else "check")
name = out.stem
print("fake runner:", " ".join(args), flush=True)
if os.environ.get("FAKE_PARENTS"):
    server = sys.modules.get("common.forkserver")  # a forked child holds its server's modules
    kind = server.process_facts()["kind"] if server else "fresh"
    with open(os.environ["FAKE_PARENTS"], "a") as f:
        f.write(f"{'check' if '--check' in args else 'run'} {module} {kind} {os.getppid()}\n")
if "--check" in args:  # the runners' check-only mode: one line, launches nothing
    if os.environ.get("FAKE_CHECKS"):
        with open(os.environ["FAKE_CHECKS"], "a") as f:
            f.write(module + "\n")
    if module == os.environ.get("FAKE_REFUSE"):
        print(f"{module}: error: --lr must be a finite number, got nan", file=sys.stderr)
        sys.exit(2)
    print(f"{module}: check passed", flush=True)
    sys.exit(0)
if os.environ.get("FAKE_ORDER"):
    with open(os.environ["FAKE_ORDER"], "a") as f:
        f.write(name + "\n")
if name == os.environ.get("FAKE_USAGE"):
    print(f"{module}: error: --bogus is not an option", file=sys.stderr)
    sys.exit(2)
if name in os.environ.get("FAKE_FAIL", "").split(","):
    print("injected failure", file=sys.stderr)
    sys.exit(3)
if name == os.environ.get("FAKE_HANG"):
    time.sleep(120)
if name == os.environ.get("FAKE_SLOW"):
    time.sleep(3)
if name == os.environ.get("FAKE_DEAF"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.fork()  # the "rank": SIGTERM ignored too, in the same process group
    time.sleep(120)
    os._exit(1)
if name == os.environ.get("FAKE_ORPHAN") and os.fork() == 0:  # a rank left behind
    time.sleep(3)
    os.environ.pop("FAKE_ORPHAN")
elif name == os.environ.get("FAKE_ORPHAN"):
    sys.exit(1)
if module == "lightning_impl.interleaved":  # the in-process plan's repeats
    import json

    doc = json.loads((Path(__file__).resolve().parent / "data" / "interleaved.json").read_text())
    # as the mode records them: the loop built first (--build-first) and the orders' seed
    flags = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--build-first"]
    which = flags[-1] if flags else "baseline"
    doc["built_first"] = doc["arms"][0 if which == "baseline" else 1]["label"]
    if "--order-seed" in args:
        doc["order_seed"] = int(args[args.index("--order-seed") + 1])
    # each process its own numbers: FAKE_BUILD_EFFECT (log ratio) added where the arm was
    # built first, a little process noise from the seed
    shift = float(os.environ.get("FAKE_BUILD_EFFECT", "0")) * (which == "arm")
    shift += (doc.get("order_seed", 0) % 7 - 3) * 0.0005
    for run in doc["runs"]:
        run["chunk_ms"] = [
            ms * math.exp(shift) if c == 1 else ms for c, ms in zip(run["order"], run["chunk_ms"])
        ]
        run["chunk_host_ms"] = [
            ms + 100 * shift if c == 1 else ms for c, ms in zip(run["order"], run["chunk_host_ms"])
        ]
        run["seconds"] = max(run["seconds"], math.fsum(run["chunk_ms"]) / 1e3 * 1.001)
    out.write_text(json.dumps(doc))
    sys.exit(1 if name == os.environ.get("FAKE_LATE_FAIL") else 0)
impl = {"native": "native", "lightning_impl": "lightning", "lightning_impl.fabric": "fabric"}[
    module
]
# Warm-up runs of a steady fake host are alike: the settling rule holds the trend of the
# baseline's warm-up medians to 1.5% a minute, and sub-second fake runs' noise would read as
# drift at that rate (FAKE_WARMUP_DRIFT makes a host that settles).
seed = 0 if "-w" in name else abs(hash(name)) % 10000
median = 100.0 * (
    1 + float(os.environ.get("FAKE_OVERHEAD", "2")) / 100 if impl == "lightning" else 1
)
median *= 1 + ((seed % 7) - 3) * 0.001  # run-to-run noise
if "-w" in name and os.environ.get("FAKE_WARMUP_DRIFT"):  # a host still settling
    median *= 1 + float(os.environ["FAKE_WARMUP_DRIFT"]) / 100 / int(name.rsplit("-w", 1)[1]) ** 2
result = make_result(impl, median_ms=median, seed=seed)
if os.environ.get("FAKE_WARMUP_HEAT"):
    from common.result import RankTelemetry

    k = int(name.rsplit("-w", 1)[1]) if "-w" in name else 0
    if os.environ["FAKE_WARMUP_HEAT"] == "endless":
        end = 30.0 + k
    else:
        end = float(round(65 - float(os.environ["FAKE_WARMUP_HEAT"]) / k**2 if k else 65))
    hot = RankTelemetry(window_seconds=0.1, gpu_temperature_c_end=end)
    ranks = [r.model_copy(update={"telemetry": hot}) for r in result.ranks]
    result = result.model_copy(update={"ranks": ranks})
write(out, result)
if name == os.environ.get("FAKE_LATE_FAIL"):
    sys.exit(1)
