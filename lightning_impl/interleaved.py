"""Native's training loop and Fabric's in one process, in chunks of K steps, interleaved.

    python -m lightning_impl.interleaved --precision bf16 --runs 10 --output in-process.json
    python -m lightning_impl.interleaved --baseline native --arm native   # A/A in one process
    python -m lightning_impl.interleaved --accelerator cpu --devices 2 --arch resnet18 \\
        --image-size 32 --chunk-steps 1 --pairs 4 --runs 2

Where the host's speed swings on a scale of a second, separate runs of each arm differ more
than the arms do. Here both loops live in one process, on the same device(s), and take turns:
chunks of K steps in a balanced random order (AB: each adjacent pair of chunks AB or BA,
half each, shuffled; ABBA: each two pairs ABBA or BAAB, which cancels a linear drift inside
them). A run is one such sequence. The runner prints what it measured (each run's median chunk
per step of both loops); compare turns each run into one number, the mean over its pairs of
log(arm chunk / baseline chunk) (`python -m compare FILE`, compare/interleaved.py).

The process is the unit of evidence: what one process fixes at its start (which loop's model
was built first, where the allocator put each, how its chunk orders fell) is shared by all its
runs, and a t over them cannot see it (issue 45: the loop built second came out faster in three
A/A checks out of three). So `--build-first baseline|arm` chooses which model is built first and
the result names it (`built_first`), and the runs' orders come from `--order-seed`, drawn afresh
by default and recorded (`order_seed`), so each process has its own and can be repeated exactly.
`python -m experiment --plan in-process` runs 6 or more processes with the build order
alternated; compare's verdict comes from the processes' means with a build-order term.

The two loops are the runners' own: native_loop calls native/benchmark.py's build and
train_step, fabric_loop lightning_impl/fabric.py's, imported, not copied
(tests/test_interleaved.py pins that). What differs is who makes the one process group: Fabric
does (fabric.ddp_setup: fabric.launch(), as its runner), and native's DDP wrapper joins the same
default group, on the same device, with the same data and seeds.

The Trainer's loop cannot be interleaved: Trainer.fit owns the loop from the first step to
the last, so a chunk of it cannot run between chunks of another loop. Trainer vs Fabric stays
a question for separate processes (python -m experiment).

Each chunk boundary records one CUDA event on the current stream (on the CPU: a perf_counter
reading, the timer seam) and reads the main thread's CPU time; nothing waits per step or per
chunk, so even K=1 keeps the GPU queue full. The ranks synchronise at the start and the end
of each run only. Warm-up pairs (both loops) run first and are not counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import random
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from common import config, launcher, option_fields, precision, preflight, training, workloads
from common.checks import all_gather, check_ranks_agree, parameter_digest
from common.environment import environment, utc_now
from common.errors import OneLineParser, UsageError, exit_on_usage_error
from common.lifetime import become_launcher, follow_launcher
from common.report import rank_failed
from common.result import SCHEMA_VERSION, InterleavedResult, write_result
from common.timing import synchronize_ranks
from lightning_impl import fabric as fabric_runner  # Fabric's runner: its build and train_step
from lightning_impl import workarounds
from lightning_impl.compat import check_lightning, lightning_facts
from lightning_impl.fabric import ddp_setup  # Fabric makes the one process group both loops use
from native import benchmark as native_runner  # native's runner: its build and train_step
from stats.distributions import median

PROG = "lightning_impl.interleaved"
LIGHTNING = workarounds.LIGHTNING
# Chunk size and pairing by default. Provisional: K=2 ABBA. The first probe (issue 35) found
# chunks of 10 too coarse (adjacent-chunk SD 6-10% at 0.5 s a pair); the host swings within a
# second, so shorter chunks see more alike conditions, and 2 steps keep a chunk's own
# boundary effects (the other loop's queue tail) a smaller share than 1 step does. ABBA cancels
# a linear drift within every 4 chunks. benchmarks/chunk_study.py measures the choice on the
# H200; change these two after reading its table.
DEFAULT_CHUNK_STEPS = 2
DEFAULT_PAIRING = "ABBA"
PAIRINGS = ("AB", "ABBA")
# The loops: whose loop, and the stream its DDP wrapper is built on (the diagnostic variants
# swap one runner's stream for the other's, as --ddp-stream does for separate runs).
LOOPS = {
    "native": ("native", "current"),
    "native-side": ("native", "side"),
    "fabric": ("fabric", "side"),
    "fabric-current": ("fabric", "current"),
}
MAX_CHUNK_STEPS = 10_000
MAX_PAIRS = 1_000_000
# Which loop's model is built first. Issue 45: the loop built second came out faster in three
# A/A checks out of three (-0.35 to -0.74%), and a process repeats whatever it fixed at the
# start, so the order is an option, recorded, and alternated over processes by the plan.
BUILD_FIRST = ("baseline", "arm")
ORDER_SEED_LIMIT = 2**63  # a drawn seed is below this (secrets.randbits(63))


INTERLEAVING = option_fields.Group(
    "interleaving",
    "the interleaved mode's own options; the workload options above are the runners'",
)


@dataclass(frozen=True)
class Options:
    """The mode's own options; the workload is BenchConfig's, the same for both loops."""

    baseline: str = option_fields.option(
        "native", INTERLEAVING, "the loop every estimate is relative to", choices=tuple(LOOPS)
    )
    arm: str = option_fields.option(
        "fabric",
        INTERLEAVING,
        "the loop compared with it (the baseline's name again: A/A in one process)",
        choices=tuple(LOOPS),
    )
    chunk_steps: int = option_fields.option(
        DEFAULT_CHUNK_STEPS,
        INTERLEAVING,
        "K: optimizer steps per chunk",
        metavar="K",
        at_least="positive",
        at_most=MAX_CHUNK_STEPS,
    )
    pairing: str = option_fields.option(
        DEFAULT_PAIRING,
        INTERLEAVING,
        "order of chunks: AB (each pair AB or BA) or ABBA (each two pairs ABBA or BAAB)",
        choices=PAIRINGS,
    )
    pairs: int = option_fields.option(
        100,
        INTERLEAVING,
        "timed pairs of chunks per run (ABBA: an even number)",
        metavar="N",
        at_least="positive",
        at_most=MAX_PAIRS,
    )
    runs: int = option_fields.option(
        10,
        INTERLEAVING,
        "runs, each with its own random order (the unit of evidence)",
        metavar="N",
        at_least="positive",
        at_most=MAX_PAIRS,
    )
    warmup_pairs: int | None = option_fields.option(
        None,
        INTERLEAVING,
        "untimed pairs before the first run (default: enough for --warmup-steps steps)",
        metavar="N",
        at_least="not negative",
        at_most=MAX_PAIRS,
    )
    build_first: str = option_fields.option(
        "baseline",
        INTERLEAVING,
        "the loop whose model is built first (the result names it: built_first); the process"
        " is the unit of evidence, so python -m experiment --plan in-process alternates it",
        choices=BUILD_FIRST,
    )
    order_seed: int | None = option_fields.option(
        None,
        INTERLEAVING,
        "seeds the runs' random chunk orders (default: drawn afresh, so each process has its"
        " own; the result records it, and giving it again repeats the orders)",
        metavar="N",
        at_least="not negative",
        at_most=ORDER_SEED_LIMIT - 1,
    )

    def resolved_warmup_pairs(self, cfg: config.BenchConfig) -> int:
        """warmup_pairs, or enough pairs for cfg.warmup_steps steps of each loop."""
        if self.warmup_pairs is not None:
            return self.warmup_pairs
        return math.ceil(cfg.warmup_steps / self.chunk_steps)

    def labels(self) -> tuple[str, str]:
        """The two loops' labels: the arm's gets -b when it is the baseline's (A/A)."""
        return self.baseline, self.arm if self.arm != self.baseline else f"{self.arm}-b"


def validate_options(options: Options, cfg: config.BenchConfig) -> None:
    """Every option of the mode, and the BenchConfig options it does not take; UsageError."""
    option_fields.check_bounds(options)
    if options.pairing == "ABBA" and options.pairs % 2:
        raise UsageError(
            f"--pairs {options.pairs} with --pairing ABBA: ABBA orders two pairs at a time;"
            " give an even --pairs or --pairing AB"
        )
    loops = {LOOPS[options.baseline], LOOPS[options.arm]}
    if {("fabric", "side"), ("fabric", "current")} <= loops:
        raise UsageError(
            "--baseline and --arm fabric and fabric-current: one process has one Fabric"
            " strategy, so one stream for its wrappers; compare them in separate processes"
        )
    default = config.BenchConfig()
    not_taken = {
        "--steps": "give --pairs and --chunk-steps (timed steps = runs x pairs x 2K)",
        "--profile-steps": "the mode profiles nothing",
        "--trace": "the mode writes no trace",
        "--pyprofile": "the mode writes no profile",
        "--ddp-stream": "name the stream in the loop: --arm native-side or fabric-current",
        "--host-delay-us": "the mode spins no host delay",
        "--compile": "the mode runs eager loops only",
    }
    for flag, fix in not_taken.items():
        name = flag.removeprefix("--").replace("-", "_")
        if getattr(cfg, name) != getattr(default, name):
            raise UsageError(f"{flag} does not apply to the interleaved mode; {fix}")


def parse(argv: list[str]) -> tuple[config.BenchConfig, Options]:
    """The runners' options (common.config) plus the mode's; exits 2 with one line if wrong."""
    mode = OneLineParser(prog=PROG, add_help=False, allow_abbrev=False)
    option_fields.add_options(mode, Options)
    known, rest = mode.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        full = config.build_parser(PROG)
        option_fields.add_options(full, Options)
        full.parse_args(["--help"])
    cfg = config.parse(rest, PROG)
    options = option_fields.from_args(Options, known)
    with exit_on_usage_error(PROG, cfg.verbose):
        validate_options(options, cfg)
    return cfg, options


def main(argv: list[str] | None = None) -> int:
    """Parse, validate, then run as rank 0 (Fabric starts the others) or as one of them."""
    follow_launcher(os.environ)
    argv = sys.argv[1:] if argv is None else argv
    cfg, options = parse(argv)
    with exit_on_usage_error(PROG, cfg.verbose):
        check_lightning(LIGHTNING)
        plan = preflight.check(cfg)
        if cfg.check:
            return preflight.passed(PROG, cfg, plan)
        become_launcher(os.environ)
        training.configure_threads(plan.threads)
        return run(cfg, options, plan.launch, plan.precision, plan.threads, argv)


# --- the two loops: each runner's own build and train_step, imported -------------------------


@dataclass
class Loop:
    """One loop in the process: its label, whose loop, its stream, one step, its model."""

    label: str
    loop: str
    ddp_stream: str
    step: Callable[[], torch.Tensor]
    module: torch.nn.Module  # the model inside DDP (for the parameter digest)
    loss: torch.Tensor | None = None


def native_loop(label: str, cfg, fabric, prec, batch) -> Loop:
    """native's loop: native/benchmark.py's build and train_step, on Fabric's device; its DDP
    wrapper joins the default process group Fabric made."""
    model, optimizer, scaler = native_runner.build(cfg, fabric.device, prec)
    wl = training.declared(cfg)
    dtype, cache = precision.autocast_dtype(prec), prec.autocast_cache_enabled
    device_type = fabric.device.type
    autocast = (  # as native's run() makes it: forward and loss only
        (lambda: torch.autocast(device_type, dtype=dtype, cache_enabled=cache))
        if dtype is not None
        else contextlib.nullcontext
    )

    def step() -> torch.Tensor:
        return native_runner.train_step(model, optimizer, scaler, wl, batch, autocast)

    return Loop(label, "native", cfg.ddp_stream, step, model.module)


def fabric_loop(label: str, cfg, fabric, prec, batch) -> Loop:
    """Fabric's loop: lightning_impl/fabric.py's build and train_step (the wrapper, autocast
    and fp16 scaler are Fabric's)."""
    model, optimizer = fabric_runner.build(cfg, fabric)
    wl = training.declared(cfg)

    def step() -> torch.Tensor:
        return fabric_runner.train_step(fabric, model, optimizer, wl, batch)

    return Loop(label, "fabric", cfg.ddp_stream, step, model.module)


def build_loop(label: str, name: str, cfg, fabric, prec, batch) -> Loop:
    """The loop `name` (LOOPS) built as its runner builds it, sharing this rank's batch."""
    loop, stream = LOOPS[name]
    # native's build reads the stream from cfg (training.ddp_construction_stream); Fabric's
    # strategy was given its stream when the process group was made (run)
    cfg = dataclasses.replace(cfg, ddp_stream=stream)
    build = native_loop if loop == "native" else fabric_loop
    return build(label, cfg, fabric, prec, batch)


def built_first(options: Options) -> str:
    """The label of the loop whose model --build-first builds first."""
    base, arm = options.labels()
    return base if options.build_first == "baseline" else arm


def build_loops(options: Options, cfg, fabric, prec, batch) -> list[Loop]:
    """Both loops, [baseline, arm], their models built in --build-first's order."""
    wanted = list(zip(options.labels(), (options.baseline, options.arm)))
    order = (0, 1) if options.build_first == "baseline" else (1, 0)
    built = {i: build_loop(*wanted[i], cfg, fabric, prec, batch) for i in order}
    return [built[0], built[1]]


def shared_order_seed(given: int | None) -> int:
    """--order-seed, or one drawn afresh by global rank 0: every rank runs the same orders
    (a rank re-executed by Fabric's launcher draws its own, so rank 0's is taken)."""
    drawn = given if given is not None else secrets.randbits(63)
    return int(all_gather(drawn)[0])  # type: ignore[call-overload]


def chunk_order(pairing: str, pairs: int, rng: random.Random) -> list[int]:
    """A balanced random order of 2 x pairs chunks (0: baseline, 1: arm).

    AB: pairs of chunks, half AB and half BA (an odd one out at random), shuffled.
    ABBA: blocks of two pairs, half ABBA and half BAAB (an odd one out at random), shuffled.
    """
    unit = ((0, 1), (1, 0)) if pairing == "AB" else ((0, 1, 1, 0), (1, 0, 0, 1))
    units = pairs if pairing == "AB" else pairs // 2
    kinds = [i % 2 for i in range(units)]
    if units % 2:
        kinds[-1] = rng.randrange(2)
    rng.shuffle(kinds)
    return [c for k in kinds for c in unit[k]]


class ChunkClock:
    """Boundaries between chunks: CUDA events on the current stream, or perf_counter on the
    CPU (the seam the CPU tests run through); the main thread's CPU time at each boundary."""

    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._marks: list = []
        self._cpu: list[int] = []

    def mark(self) -> None:
        """A boundary now, without waiting for the device."""
        if self._cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._marks.append(event)
        else:
            self._marks.append(time.perf_counter())
        self._cpu.append(time.thread_time_ns())

    def chunks(self) -> tuple[list[float], list[float]]:
        """(wall ms, host CPU ms) of each chunk; call after the device was synchronised."""
        pairs = list(zip(self._marks, self._marks[1:]))
        if self._cuda:
            wall = [a.elapsed_time(b) for a, b in pairs]
        else:
            wall = [(b - a) * 1e3 for a, b in pairs]
        host = [(b - a) / 1e6 for a, b in zip(self._cpu, self._cpu[1:])]
        return wall, host


def run_chunks(loops: list[Loop], order: list[int], k: int, device) -> tuple[list, list, float]:
    """Run the chunks in `order`, K steps each; (chunk ms, host ms, seconds) of this rank."""
    clock = ChunkClock(device)
    synchronize_ranks(device)
    start = time.perf_counter()
    clock.mark()
    for which in order:
        loop = loops[which]
        for _ in range(k):
            loop.loss = loop.step()
        clock.mark()
    synchronize_ranks(device)
    wall, host = clock.chunks()
    return wall, host, time.perf_counter() - start


def warm_up(loops: list[Loop], pairs: int, k: int) -> None:
    """Untimed pairs, AB then BA: autotuning, DDP's bucket rebuild and caches of both loops."""
    for i in range(pairs):
        for which in (0, 1) if i % 2 == 0 else (1, 0):
            for _ in range(k):
                loops[which].loss = loops[which].step()


def run(
    cfg: config.BenchConfig,
    options: Options,
    launch: launcher.Launch,
    prec: precision.Precision,
    threads: int,
    argv: list[str],
) -> int:
    """One rank: the process group, both loops, the runs, the result; teardown in every case."""
    started = utc_now()
    workarounds.quiet_lightning(cfg.verbose)
    # one Fabric strategy in the process: its stream is the Fabric loop's (fabric-current)
    fabric_stream = next(
        (LOOPS[n][1] for n in (options.baseline, options.arm) if LOOPS[n][0] == "fabric"), "side"
    )
    fabric = ddp_setup(dataclasses.replace(cfg, ddp_stream=fabric_stream), launch, prec)
    rank, world_size, device = fabric.global_rank, fabric.world_size, fabric.device
    say = (lambda msg: print(f"{PROG}: {msg}", flush=True)) if rank == 0 else (lambda msg: None)
    workarounds.stop_at_once_on_signals(fabric.strategy, PROG, rank, ctrl_c=True)
    try:
        check_ranks_agree(
            prec.resolved,
            "the resolved precision",
            "GPUs differ between nodes: choose --precision explicitly",
        )
        precision.apply_backend_flags(prec, cfg.cudnn_benchmark)
        batch_size = cfg.per_device_batch(world_size)
        batch = training.make_batch(cfg, batch_size, rank, device)
        loops = build_loops(options, cfg, fabric, prec, batch)
        seed = shared_order_seed(options.order_seed)
        k = options.chunk_steps
        warmup = options.resolved_warmup_pairs(cfg)
        say(
            f"{world_size} rank(s), {device.type}, {prec.resolved}: {loops[0].label} and"
            f" {loops[1].label} ({built_first(options)} built first), chunks of {k} step(s),"
            f" {options.pairing} (order seed {seed}), {warmup} warm-up pair(s),"
            f" {options.runs} run(s) of {options.pairs} pairs"
        )
        warm_up(loops, warmup, k)
        runs = []
        for r in range(options.runs):
            order = chunk_order(options.pairing, options.pairs, random.Random(f"{seed}:{r}"))
            wall, host, seconds = run_chunks(loops, order, k, device)
            runs.append((order, wall, host, seconds))
        facts = (launch, started, ["python", "-m", PROG, *argv], seed)
        result = build_result(cfg, options, fabric, prec, loops, runs, facts)
        if result is not None:
            publish(result, cfg)
        return 0
    except UsageError:
        raise
    except Exception as error:
        workarounds.stop_started_ranks(fabric.strategy)
        if cfg.verbose:
            raise
        return rank_failed(PROG, rank, error)
    finally:
        dist.destroy_process_group()


def build_result(cfg, options, fabric, prec, loops, runs, facts):
    """Gather every rank's chunks and digests; global rank 0 returns the result, others None."""
    from common.environment import device_name, diagnostics, hostname

    mine = {
        "runs": [(wall, host) for _, wall, host, _ in runs],
        "digests": [parameter_digest(loop.module).sha256 for loop in loops],
        "losses": [
            float(loop.loss.float().cpu()) if loop.loss is not None else 0.0 for loop in loops
        ],
        "host": hostname(),
        "device": device_name(fabric.device),
    }
    records = all_gather(mine)
    if fabric.global_rank != 0:
        return None
    arms = []
    for i, loop in enumerate(loops):
        losses = [r["losses"][i] for r in records]
        if not all(math.isfinite(x) for x in losses):
            raise RuntimeError(f"{loop.label} diverged: final losses per rank {losses}")
        digests = [r["digests"][i] for r in records]
        arms.append(
            {
                "label": loop.label,
                "loop": loop.loop,
                "ddp_stream": loop.ddp_stream,
                "parameter_digest": digests[0],
                "parameters_synchronized": len(set(digests)) == 1,
                "final_loss_mean": sum(losses) / len(losses),
            }
        )
    out_runs = []
    for j, (order, _, _, seconds) in enumerate(runs):
        walls = [r["runs"][j][0] for r in records]
        hosts = [r["runs"][j][1] for r in records]
        out_runs.append(
            {
                "order": order,
                "chunk_ms": [max(ts) for ts in zip(*walls)],  # the slowest rank sets the pace
                "chunk_host_ms": [sum(ts) / len(ts) for ts in zip(*hosts)],
                "seconds": seconds,
            }
        )
    launch, started, command, seed = facts
    world = fabric.world_size
    per_device = cfg.per_device_batch(world)
    env = environment(
        fabric.device,
        [r["device"] for r in records],
        [r["host"] for r in records],
        launch.kind,
        launch.slurm,
        started,
        command,
        diagnostics=diagnostics(cfg),
    )
    return InterleavedResult(
        schema_version=SCHEMA_VERSION,
        kind="interleaved",
        arms=arms,
        chunk_steps=options.chunk_steps,
        pairing=options.pairing,
        pairs=options.pairs,
        warmup_pairs=options.resolved_warmup_pairs(cfg),
        built_first=built_first(options),
        order_seed=seed,
        timer="cuda-events" if fabric.device.type == "cuda" else "wall-clock",
        model=training.declared(cfg).describe(cfg.workload_options),
        workload=workloads.info(training.declared(cfg), cfg.workload, cfg.workload_options),
        world_size=world,
        batch_size_per_device=per_device,
        global_batch_size=per_device * world,
        config=cfg.as_dict(),
        options=dataclasses.asdict(options),
        precision=prec.as_dict(),
        runs=out_runs,
        lightning=lightning_facts(world, trainer=False),
        environment=env,
    )


def summary(result: InterleavedResult, output: Path | None) -> str:
    """What rank 0 measured, in a few lines: each run's median chunk per step of both loops.
    The estimate over runs, its interval and its verdict are compare's."""
    k, (base, arm) = result.chunk_steps, (a.label for a in result.arms)
    seconds = sum(run.seconds for run in result.runs)
    lines = [
        f"{PROG}: {len(result.runs)} run(s) of {result.pairs} pairs of {k}-step chunks"
        f" ({result.pairing}, {result.timer}), {seconds:.1f} s timed; {result.built_first}"
        f" built first, order seed {result.order_seed}"
    ]
    for i, run in enumerate(result.runs, 1):
        own = [
            median([ms for c, ms in zip(run.order, run.chunk_ms) if c == which]) / k
            for which in (0, 1)
        ]
        lines.append(
            f"  run {i}: {base} {own[0]:.3f} ms/step, {arm} {own[1]:.3f} ms/step (median chunk)"
        )
    where = output if output is not None else "FILE (write one with --output FILE)"
    lines.append(f"  the estimate, its interval and verdict: python -m compare {where}")
    return "\n".join(lines) + "\n"


def publish(result: InterleavedResult, cfg: config.BenchConfig) -> None:
    """Rank 0: what it measured in a few lines, then the file (common.output's writer) if
    asked."""
    print(summary(result, cfg.output), end="", flush=True)
    if cfg.output is not None:
        write_result(result, cfg.output, cfg.overwrite_output)
        print(f"  result: {cfg.output}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
