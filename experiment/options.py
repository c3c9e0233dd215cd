"""The options of `python -m experiment`, declared once: a frozen dataclass whose fields are
the flags, as the runners' BenchConfig is (common.config: `option`, `add_options`,
`from_args`, `check_bounds`).

    parser = OneLineParser(...); add_options(parser, ExperimentOptions)
    opts = from_args(ExperimentOptions, parser.parse_args(argv)); check(opts)

The parser (experiment.cli), the checks (`check`) and the in-process plan's refusals (the
fields that differ from their defaults) all read these fields. Imports neither torch nor
lightning.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from common.errors import UsageError
from common.option_fields import Group, check_bounds, option
from experiment.labelled_arms import DEFAULT_ARMS
from experiment.settings import PROFILE_RUNS, SETTLE_MINUTES
from stats import orders
from stats.settling import SETTLE_BETWEEN_RUNS, SETTLE_GPU_RISE_C, SETTLE_WITHIN_RUN
from stats.stopping import FIRST_STAGE_BLOCKS

DEFAULT_REPEATS = 3
DEFAULT_WARMUP_RUNS = 1
ADAPTIVE_MAX_BLOCKS = 20
LAUNCHES = ("auto", "fork", "fresh", "srun")
OPTIONS = Group(None)  # the parser's own section: the command has one list of options


@dataclass(frozen=True)
class ExperimentOptions:
    """Every option of the command before `--`, in the order --help lists them."""

    arms: str | None = option(
        None,
        OPTIONS,
        f"arms in order, the first is the baseline: native, fabric, lightning,"
        f" lightning-services, an ablation arm by its name (common/arms.py, e.g."
        f" fabric-torch-autocast), or all (those four; default {','.join(DEFAULT_ARMS)});"
        " an arm listed twice runs an A/A check (native,native); LABEL=RUNNER@PYTHON runs"
        " RUNNER under another interpreter (another Lightning or torch), labelled LABEL (default"
        " RUNNER-VERSION)",
        metavar="A,B,...",
    )
    envs: Path | None = option(
        None,
        OPTIONS,
        "with --plan: the folder of the plan's environments, DIR/<env>/bin/python"
        " (tools/make_env.py makes them; docs/versions.md)",
        metavar="DIR",
    )
    repeats: int | None = option(
        None,
        OPTIONS,
        f"blocks to run, i.e. runs per arm (default {DEFAULT_REPEATS} for two arms; for more,"
        " one cycle of carry-over-balanced orders, 2 x arms blocks; a plan's own; with"
        f" --target-half-width the most, default {ADAPTIVE_MAX_BLOCKS}, a plan's too)",
        metavar="R",
    )
    warmup_runs: int = option(
        DEFAULT_WARMUP_RUNS,
        OPTIONS,
        f"runs of each arm before block 1, recorded in the manifest but not counted"
        f" (default {DEFAULT_WARMUP_RUNS}; 0 counts every run): a fresh machine's first"
        " runs are slower, and block 1 starts with the baseline",
        metavar="K",
    )
    target_half_width: float | None = option(
        None,
        OPTIONS,
        "adaptive, by Stein's two-stage rule: the first stage's complete blocks measure"
        " the spread, which fixes how many complete blocks each arm needs for a 95%% interval of"
        " +-PP percentage points; the experiment runs until every arm has them (a failed run"
        " leaves its block incomplete) or --repeats blocks were started. Stopping this way keeps"
        " the interval's 95%% (a rule that stops when the interval looks narrow does not)",
        metavar="PP",
    )
    first_stage_blocks: int | None = option(
        None,
        OPTIONS,
        f"with --target-half-width: complete blocks of the first stage (default"
        f" {FIRST_STAGE_BLOCKS}, at least 2; the experiment runs at least this many)",
        metavar="N",
    )
    settle_minutes: float = option(
        SETTLE_MINUTES,
        OPTIONS,
        f"after the warm-up runs, more uncounted runs of the baseline until the host has"
        f" settled (a trend of its run medians over {SETTLE_BETWEEN_RUNS * 100:g}%% a minute"
        f" ruled out, the last run's halves within {SETTLE_WITHIN_RUN * 100:g}%%) and the GPU"
        f" has warmed (its temperature rising at most {SETTLE_GPU_RISE_C:g} C a minute: a"
        f" warming GPU's energy per unit climbs), for at most M minutes of warm-up in all (default"
        f" {SETTLE_MINUTES:g}; 0: no settling; with --warmup-runs 0 there is no warm-up and no"
        " settling); the manifest and the report say how long it took, or that the host had"
        " not settled or the GPU was still warming (and, where M was too short for the rule to"
        " judge, a bound that is not)",
        metavar="M",
    )
    budget_minutes: float | None = option(
        None,
        OPTIONS,
        "start no block that would end, at the mean block time so far, after M minutes"
        " (counted from the command's start: the checks, the fork servers' imports and the"
        " warm-up runs are in them; in a plan of several experiments, each later one's from its"
        " own start)",
        metavar="M",
    )
    run_timeout: float | None = option(
        None,
        OPTIONS,
        "stop a run after S seconds (SIGTERM, then SIGKILL); it is recorded as failed",
        metavar="S",
    )
    plan: str | None = option(
        None, OPTIONS, "run a named plan (--list-plans); options after -- are added", metavar="NAME"
    )
    variant: str | None = option(None, OPTIONS, "with --plan: only this variant", metavar="NAME")
    list_plans: bool = option(False, OPTIONS, "print every plan's name and question", switch=True)
    out: Path | None = option(
        None,
        OPTIONS,
        "the experiment folder, new or empty (default out/<plan or arms>-<UTC time>/)",
        metavar="DIR",
    )
    launch: str = option(
        "auto",
        OPTIONS,
        "fork: every run (each of its ranks) forked from a warm interpreter per arm"
        " python, which imported torch and the runner once; fresh: a new process per run,"
        " which starts its ranks itself; srun: each run through srun --kill-on-bad-exit=1 with"
        " --devices/--num-nodes from the job; auto (default): srun inside a Slurm allocation,"
        " else fork",
        choices=LAUNCHES,
    )
    profile_runs: str | None = option(
        None,
        OPTIONS,
        "which runs profile their --profile-steps after the timed steps (the GPU busy share"
        " of the report's host-bound warning and host table): first (default) each arm's first"
        " counted run, the others and the warm-up runs with --profile-steps 0, since the window"
        " costs seconds a run and changes no timed step; all: every run (needed by --trace)",
        choices=PROFILE_RUNS,
    )
    python: str = option(
        sys.executable,
        OPTIONS,
        "the interpreter that runs the runners (default: this one)",
        metavar="PATH",
    )


def check(opts: ExperimentOptions) -> None:
    """UsageError for the first option out of its bounds (one line naming it), in the words
    the command has always used; then common.option_fields' check that every number is finite."""
    if opts.repeats is not None and opts.repeats < 1:
        raise UsageError(f"--repeats must be 1 or more, got {opts.repeats}")
    if opts.warmup_runs < 0:
        raise UsageError(f"--warmup-runs must be 0 or more, got {opts.warmup_runs}")
    _positive(
        "--target-half-width", opts.target_half_width, "a positive number of percentage points"
    )
    _positive("--budget-minutes", opts.budget_minutes)
    if opts.first_stage_blocks is not None and opts.target_half_width is None:
        raise UsageError("--first-stage-blocks needs --target-half-width (the adaptive rule)")
    if opts.first_stage_blocks is not None and opts.first_stage_blocks < 2:
        raise UsageError(f"--first-stage-blocks must be 2 or more, got {opts.first_stage_blocks}")
    if not (opts.settle_minutes >= 0 and math.isfinite(opts.settle_minutes)):
        raise UsageError(f"--settle-minutes must be 0 or more, got {opts.settle_minutes}")
    if opts.run_timeout is not None and not opts.run_timeout > 0:
        raise UsageError(f"--run-timeout must be positive, got {opts.run_timeout}")
    check_bounds(opts)  # what is left: a --run-timeout of inf


def default_repeats(arms: int, adaptive: bool, plan: int | None = None) -> int:
    """The blocks when --repeats is not given. With --target-half-width the most Stein's rule
    may run (ADAPTIVE_MAX_BLOCKS; a plan's repeats is its fixed design's, and would cap the
    rule below the blocks it asks for). Else the plan's, or for 3 or more arms one whole cycle
    of stats.orders (2 x arms blocks), over which every arm follows every arm equally often (3
    blocks of 3 arms cannot: a carry-over of 0.3% gave A/A false verdicts of 7-8%); for two
    arms DEFAULT_REPEATS (ABBA's blocks balance carry-over at any count)."""
    if adaptive:
        return ADAPTIVE_MAX_BLOCKS
    if plan is not None:
        return plan
    return len(orders.cycle(arms)) if arms >= 3 else DEFAULT_REPEATS


def check_blocks(repeats: int, first_stage: int) -> None:
    """UsageError when Stein's rule could not run its first stage: --repeats below
    --first-stage-blocks (a plan's repeats does not cap the rule: default_repeats)."""
    if repeats < first_stage:
        raise UsageError(
            f"--repeats {repeats} is below the first stage of --target-half-width"
            f" ({first_stage} complete blocks, --first-stage-blocks): give --repeats"
            f" {first_stage} or more, or a smaller --first-stage-blocks"
        )


def _positive(name: str, value: float | None, what: str = "positive") -> None:
    """A finite number above 0, when given."""
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{name} must be {what}, got {value}")


def changed(opts: ExperimentOptions, names: tuple[str, ...]) -> str | None:
    """The flag of the first of `names` whose value differs from its default, or None."""
    defaults = ExperimentOptions()
    for name in names:
        if getattr(opts, name) != getattr(defaults, name):
            return "--" + name.replace("_", "-")
    return None
