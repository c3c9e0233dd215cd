"""The command line of `python -m experiment`.

    python -m experiment --arms native,lightning --repeats 5 -- --devices 2 --precision bf16
    python -m experiment --plan precisions -- --devices 8
    python -m experiment --target-half-width 0.5 --budget-minutes 5 -- --batch-size-per-device 256

User mistakes: one line on stderr, exit 2, before any run starts.
"""

from __future__ import annotations

import argparse
import math
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import NoReturn

from common.errors import OneLineParser
from experiment import launch, plans
from experiment.arms import DEFAULT_ARMS, label_arms, parse_arms
from experiment.run import EXIT_USAGE, MIN_ADAPTIVE_BLOCKS, PROG, Experiment, Settings, check_placeholders

DEFAULT_REPEATS = 3
DEFAULT_WARMUP_RUNS = 1
ADAPTIVE_MAX_BLOCKS = 20
FORBIDDEN = ("--output", "--overwrite-output")



def build_parser() -> argparse.ArgumentParser:
    """Every option of the command, with its help text."""
    p = OneLineParser(
        prog=PROG, allow_abbrev=False,
        usage="python -m experiment [OPTIONS] [-- RUNNER OPTIONS]",
        description="Run a paired experiment: every arm with identical runner options (those after --),"
                    " each run a fresh process, in ABBA blocks (block 1 in the given order, block 2"
                    " reversed, ...). Leaves one folder: results/, logs/, manifest.json, report.txt,"
                    " report.md, comparison.png.",
        epilog="Placeholders in runner options, filled in per run: {out} (the folder), {label},"
               " {repeat}, {run} (= {label}-r{repeat}; {label}-w{k} for the k-th warm-up run, whose"
               " {repeat} is k); name per-run files by {run}, e.g. --pyprofile {out}/pyprofile/{run}.pstats."
               " Exit status: 0 when every run and the report succeeded; 1 when a run or compare failed"
               " (the others are kept); 2 for a usage error (also when a run exits 2); 130/143 when"
               " stopped by SIGINT/SIGTERM.")
    p.add_argument("--arms", metavar="A,B,...",
                   help=f"arms in order, the first is the baseline: native, fabric, lightning,"
                        f" lightning-services, or all (default {','.join(DEFAULT_ARMS)}); an arm listed"
                        " twice runs an A/A check (native,native)")
    p.add_argument("--repeats", type=int, metavar="R",
                   help=f"blocks to run, i.e. runs per arm (default {DEFAULT_REPEATS}; with"
                        f" --target-half-width the most, default {ADAPTIVE_MAX_BLOCKS})")
    p.add_argument("--warmup-runs", type=int, default=DEFAULT_WARMUP_RUNS, metavar="K",
                   help=f"runs of each arm before block 1, recorded in the manifest but not counted"
                        f" (default {DEFAULT_WARMUP_RUNS}; 0 counts every run): a fresh machine's first"
                        " runs are slower, and block 1 starts with the baseline")
    p.add_argument("--target-half-width", type=float, metavar="PP",
                   help="adaptive: stop once every arm's 95%% interval of the overhead is at most PP"
                        f" percentage points wide on each side (checked from block {MIN_ADAPTIVE_BLOCKS})")
    p.add_argument("--budget-minutes", type=float, metavar="M",
                   help="start no block that would end, at the mean block time so far, after M minutes")
    p.add_argument("--run-timeout", type=float, metavar="S",
                   help="stop a run after S seconds (SIGTERM, then SIGKILL); it is recorded as failed")
    p.add_argument("--plan", metavar="NAME", help="run a named plan (--list-plans); options after -- are added")
    p.add_argument("--variant", metavar="NAME", help="with --plan: only this variant")
    p.add_argument("--list-plans", action="store_true", help="print every plan's name and question")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="the experiment folder, new or empty (default out/<plan or arms>-<UTC time>/)")
    p.add_argument("--launch", choices=("auto", "self", "srun"), default="auto",
                   help="self: the runner starts its ranks; srun: each run through srun"
                        " --kill-on-bad-exit=1 with --devices/--num-nodes from the job;"
                        " auto (default): srun inside a Slurm allocation, else self")
    p.add_argument("--python", default=sys.executable, metavar="PATH",
                   help="the interpreter that runs the runners and compare (default: this one)")
    return p


def fail(message: str) -> NoReturn:
    """A user mistake: one line, exit 2."""
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_USAGE)


def check_out(out: Path) -> None:
    """The folder must be new or empty."""
    if out.exists() and not out.is_dir():
        fail(f"--out {out} is a file; give a new folder")
    if out.is_dir() and any(out.iterdir()):
        fail(f"--out {out} is not empty; give a new folder (results are never overwritten)")


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(own options, runner options after --)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def experiments(args: argparse.Namespace, runner: list[str], command: list[str]) -> list[Settings]:
    """The experiments to run, validated; fail() on any mistake."""
    if args.repeats is not None and args.repeats < 1:
        fail(f"--repeats must be 1 or more, got {args.repeats}")
    if args.warmup_runs < 0:
        fail(f"--warmup-runs must be 0 or more, got {args.warmup_runs}")
    if args.target_half_width is not None and not (args.target_half_width > 0 and math.isfinite(args.target_half_width)):
        fail(f"--target-half-width must be a positive number of percentage points, got {args.target_half_width}")
    if args.budget_minutes is not None and not (args.budget_minutes > 0 and math.isfinite(args.budget_minutes)):
        fail(f"--budget-minutes must be positive, got {args.budget_minutes}")
    if args.run_timeout is not None and not args.run_timeout > 0:
        fail(f"--run-timeout must be positive, got {args.run_timeout}")
    for opt in runner:
        if opt.split("=")[0] in FORBIDDEN:
            fail(f"runner option {opt}: results go into the experiment folder; use --out DIR")
    try:
        check_placeholders(runner)
    except ValueError as error:
        fail(str(error))
    mode = launch.resolve_mode(args.launch)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    adaptive_repeats = ADAPTIVE_MAX_BLOCKS if args.target_half_width is not None else DEFAULT_REPEATS
    common = dict(python=args.python, launch=mode, warmup_runs=args.warmup_runs,
                  target_half_width=args.target_half_width,
                  budget_minutes=args.budget_minutes, command=command)
    if args.plan is None:
        if args.variant is not None:
            fail("--variant needs --plan")
        try:
            arms = parse_arms(args.arms) if args.arms else label_arms(list(DEFAULT_ARMS))
        except ValueError as error:
            fail(str(error))
        out = args.out or Path("out") / f"{'-'.join(a.label for a in arms)}-{stamp}"
        check_out(out)
        found = [Settings(out=out, arms=arms, options=runner, repeats=args.repeats or adaptive_repeats,
                          run_timeout=args.run_timeout, **common)]
    else:
        if args.arms:
            fail("--arms and --plan: a plan names its own arms")
        try:
            plan = plans.find(args.plan)
        except ValueError as error:
            fail(str(error))
        variants = [v for v in plan.variants if args.variant in (None, v.name)]
        if not variants:
            fail(f"--variant: plan {plan.name} has no variant '{args.variant}';"
                 f" choose from {', '.join(v.name for v in plan.variants)}")
        root = args.out or Path("out") / f"{plan.name}-{stamp}"
        check_out(root)
        found = []
        for v in variants:
            options = [*plan.options, *v.options, *runner]
            check_placeholders(options)
            found.append(Settings(
                out=root / v.name if v.name else root, arms=list(v.arms or plan.arms), options=options,
                repeats=args.repeats or plan.repeats, experiment=f"{plan.name}/{v.name}" if v.name else plan.name,
                run_timeout=args.run_timeout or v.run_timeout, compare_options=list(plan.compare_options),
                env=dict(v.env), **common))
    for s in found:
        if mode == "srun":
            try:
                launch.srun_options(s.options)
            except ValueError as error:
                fail(str(error))
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    own, runner = split_argv(argv)
    try:
        args = build_parser().parse_args(own)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.list_plans:
        width = max(len(p.name) for p in plans.PLANS)
        for plan in plans.PLANS:
            variants = f" [{', '.join(v.name for v in plan.variants)}]" if plan.variants[0].name else ""
            print(f"{plan.name:<{width}}  {plan.question}{variants}")
        return 0
    try:
        found = experiments(args, runner, ["python", "-m", "experiment", *argv])
    except SystemExit as exit_:
        return int(exit_.code or 0)
    status = 0
    for s in found:
        s.out.mkdir(parents=True, exist_ok=True)
        code = Experiment(s).run()
        if code in (EXIT_USAGE, 130, 143):
            return code
        status = status or code
    return status
