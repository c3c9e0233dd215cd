"""Which chunk size K and which pairing the interleaved mode should use: measured in one process.

    python -m benchmarks.chunk_study --precision bf16 --output chunk-study.json  # H200, ~2.5 min
    python -m benchmarks.chunk_study --accelerator cpu --arch resnet18 --image-size 32 \\
        --seconds-per-config 1 --output /tmp/study.json                         # CPU smoke run

One process, one device (or the ranks Fabric starts): native's loop and Fabric's, built once as
lightning_impl/interleaved.py builds them, warmed up, then for every K in --chunk-sizes and
every pairing in --pairings a stretch of chunks of about --seconds-per-config seconds, in
--rounds rounds (the configurations in a fresh random order each round, so that a slow minute
falls on no one configuration). For each configuration it reports, over its pairs:

- sd_pair: the SD of the adjacent pairs' log(Fabric chunk / native chunk);
- lag1: the autocorrelation of successive pairs' log ratios (the host's swings outlast a pair
  when it is clearly positive);
- seconds_per_pair, and the implied 95% half-width in percentage points of an estimate that
  spends --budget-seconds (default 300) on such pairs: 1.96 x sd_pair x sqrt(seconds_per_pair
  / budget) x sqrt((1 + lag1) / (1 - lag1)) (an AR(1) inflation; lag1 clipped to [0, 0.9]);
- the mean log ratio in percent and the host CPU difference per step (descriptive).

The smallest implied half-width chooses K and the pairing (lightning_impl.interleaved's
DEFAULT_CHUNK_STEPS and DEFAULT_PAIRING). Writes the JSON to --output and a text table beside
it (the same name with .txt) through common.output; prints the table.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import asdict, dataclass

from common import config, option_fields, preflight, training
from common.errors import OneLineParser, UsageError, exit_on_usage_error
from common.output import output_path_problem, write_text
from compare.interleaved import pair_values

PROG = "benchmarks.chunk_study"
Z95 = 1.959963984540054
MAX_LAG1 = 0.9


def _ints(text: str) -> tuple[int, ...]:
    """argparse type for --chunk-sizes: whole numbers, comma-separated."""
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes whole numbers, e.g. 1,2,5; got {text!r}") from None


def _pairings(text: str) -> tuple[str, ...]:
    """argparse type for --pairings: AB, ABBA or both."""
    values = tuple(text.split(","))
    if any(v not in ("AB", "ABBA") for v in values):
        raise argparse.ArgumentTypeError(f"takes AB, ABBA or AB,ABBA; got {text!r}")
    return values


STUDY = option_fields.Group("chunk study", "what the study sweeps and how long it spends on each")


@dataclass(frozen=True)
class StudyOptions:
    """What the study sweeps and how long it spends on each configuration."""

    chunk_sizes: tuple[int, ...] = option_fields.option(
        (1, 2, 5, 10, 20), STUDY, "chunk sizes K to measure", metavar="K,K,...", parse=_ints
    )
    pairings: tuple[str, ...] = option_fields.option(
        ("AB", "ABBA"), STUDY, "pairings to measure", metavar="AB,ABBA", parse=_pairings
    )
    seconds_per_config: float = option_fields.option(
        11.0, STUDY, "seconds of chunks per configuration, over all rounds", at_least="positive"
    )
    rounds: int = option_fields.option(
        2, STUDY, "rounds, each over every configuration", at_least="positive", at_most=100
    )
    budget_seconds: float = option_fields.option(
        300.0, STUDY, "the estimate's time the half-width is implied for", at_least="positive"
    )


@dataclass(frozen=True)
class Row:
    """One configuration's measurements (see the module docstring)."""

    chunk_steps: int
    pairing: str
    pairs: int
    seconds_per_pair: float
    sd_pair: float
    lag1: float
    half_width_pp: float
    mean_percent: float
    host_ms_per_step: float


def parse(argv: list[str]) -> tuple[config.BenchConfig, StudyOptions]:
    """The runners' options plus the study's; exits 2 with one line naming the option."""
    p = OneLineParser(prog=PROG, add_help=False, allow_abbrev=False)
    option_fields.add_options(p, StudyOptions)
    known, rest = p.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        full = config.build_parser(PROG)
        option_fields.add_options(full, StudyOptions)
        full.parse_args(["--help"])
    cfg = config.parse(rest, PROG)
    options = option_fields.from_args(StudyOptions, known)
    with exit_on_usage_error(PROG, cfg.verbose):
        option_fields.check_bounds(options)
        if any(not 1 <= k <= 10_000 for k in options.chunk_sizes):
            raise UsageError("--chunk-sizes must be whole numbers from 1 to 10000")
        if cfg.output is None:
            raise UsageError("--output PATH is needed: the study writes its JSON there")
        table = cfg.output.with_suffix(".txt")
        if problem := output_path_problem("--output (its .txt table)", table, cfg.overwrite_output):
            raise UsageError(problem)
    return cfg, options


def lag1(values: list[float]) -> float:
    """Autocorrelation at lag 1 (0 for fewer than 3 values or no variance)."""
    n = len(values)
    if n < 3:
        return 0.0
    m = sum(values) / n
    den = sum((v - m) ** 2 for v in values)
    if den == 0:
        return 0.0
    return sum((a - m) * (b - m) for a, b in zip(values, values[1:])) / den


def summarise(
    k: int, pairing: str, stretches: list[tuple[list, list, list, float]], budget: float
) -> Row:
    """One configuration's row from its stretches (order, chunk ms, host ms, seconds)."""
    logs, host, lags, seconds, pairs = [], [], [], 0.0, 0
    for order, wall, hosts, secs in stretches:
        these = [math.log(b / a) for a, b in pair_values(order, wall)]
        logs += these
        lags.append((lag1(these), len(these)))
        host += [(b - a) / k for a, b in pair_values(order, hosts)]
        seconds += secs
        pairs += len(these)
    m = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1)) if len(logs) > 1 else 0.0
    rho = sum(r * n for r, n in lags) / sum(n for _, n in lags)
    rho_used = min(max(rho, 0.0), MAX_LAG1)
    per_pair = seconds / pairs
    inflation = math.sqrt((1 + rho_used) / (1 - rho_used))
    return Row(
        chunk_steps=k,
        pairing=pairing,
        pairs=pairs,
        seconds_per_pair=per_pair,
        sd_pair=sd,
        lag1=rho,
        half_width_pp=Z95 * sd * math.sqrt(per_pair / budget) * inflation * 100,
        mean_percent=math.expm1(m) * 100,
        host_ms_per_step=sum(host) / len(host),
    )


def table(rows: list[Row], budget: float) -> str:
    """The rows as an aligned text table, best (smallest half-width) first."""
    head = (
        f"{'K':>4} {'order':>5} {'pairs':>6} {'s/pair':>7} {'sd_pair%':>8} {'lag1':>6}"
        f" {'hw@' + format(budget, '.0f') + 's pp':>11} {'fabric-native%':>14} {'host ms':>8}"
    )
    lines = [head]
    for r in sorted(rows, key=lambda r: r.half_width_pp):
        lines.append(
            f"{r.chunk_steps:>4} {r.pairing:>5} {r.pairs:>6} {r.seconds_per_pair:>7.3f}"
            f" {r.sd_pair * 100:>8.2f} {r.lag1:>6.2f} {r.half_width_pp:>11.2f}"
            f" {r.mean_percent:>+14.2f} {r.host_ms_per_step:>+8.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse, build both loops once, sweep the configurations, write the JSON and the table."""
    argv = sys.argv[1:] if argv is None else argv
    cfg, options = parse(argv)
    from lightning_impl import interleaved as il

    with exit_on_usage_error(PROG, cfg.verbose):
        il.check_lightning(il.LIGHTNING)
        plan = preflight.check(cfg)
        training.configure_threads(plan.threads)
        il.workarounds.quiet_lightning(cfg.verbose)
        fabric = il.ddp_setup(cfg, plan.launch, plan.precision)
    import torch.distributed as dist

    try:
        from common import precision

        precision.apply_backend_flags(plan.precision, cfg.cudnn_benchmark)
        device, rank = fabric.device, fabric.global_rank
        batch = training.make_batch(cfg, cfg.per_device_batch(fabric.world_size), rank, device)
        loops = [
            il.build_loop(name, name, cfg, fabric, plan.precision, batch)
            for name in ("native", "fabric")
        ]
        warm = max(1, math.ceil(cfg.warmup_steps / 2))
        il.warm_up(loops, warm, 2)
        # a step's time, for how many pairs fill a configuration's seconds (all ranks agree)
        step_ms = max(il.all_gather(sum(il.run_chunks(loops, [0, 1] * 5, 2, device)[0]) / 20))
        configs = [(k, p) for k in options.chunk_sizes for p in options.pairings]
        per_round = options.seconds_per_config / options.rounds
        stretches: dict[tuple[int, str], list] = {c: [] for c in configs}
        rng = random.Random(cfg.seed)
        for _ in range(options.rounds):
            rng.shuffle(configs)
            for k, pairing in configs:
                pairs = max(2, round(per_round * 1e3 / (2 * k * step_ms)))
                pairs += pairs % 2  # ABBA takes two at a time; AB the same count
                order = il.chunk_order(pairing, pairs, rng)
                wall, host, seconds = il.run_chunks(loops, order, k, device)
                walls = il.all_gather(wall)
                hosts = il.all_gather(host)
                wall = [max(ts) for ts in zip(*walls)]
                host = [sum(ts) / len(ts) for ts in zip(*hosts)]
                stretches[(k, pairing)].append((order, wall, host, seconds))
        if rank != 0:
            return 0
        rows = [
            summarise(k, p, stretches[(k, p)], options.budget_seconds) for k, p in sorted(stretches)
        ]
        text = table(rows, options.budget_seconds)
        doc = {
            "study": "chunk size and pairing of the interleaved mode (native vs fabric)",
            "step_ms_estimate": step_ms,
            "options": asdict(options),
            "config": cfg.as_dict(),
            "precision": plan.precision.resolved,
            "timer": "cuda-events" if device.type == "cuda" else "wall-clock",
            "rows": [asdict(r) for r in rows],
            "stretches": {
                f"{k}-{p}": [{"order": o, "chunk_ms": w, "chunk_host_ms": h, "seconds": s}
                             for o, w, h, s in v]
                for (k, p), v in sorted(stretches.items())
            },
        }  # fmt: skip
        with exit_on_usage_error(PROG, cfg.verbose):
            mode = "overwrite" if cfg.overwrite_output else "new"
            write_text(cfg.output, json.dumps(doc, indent=1) + "\n", mode=mode)
            write_text(cfg.output.with_suffix(".txt"), text + "\n", mode=mode)
        print(text, flush=True)
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
