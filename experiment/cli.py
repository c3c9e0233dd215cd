"""The command line of `python -m experiment`.

    python -m experiment --arms native,lightning --repeats 5 -- --devices 2 --precision bf16
    python -m experiment --plan precisions -- --devices 8
    python -m experiment --target-half-width 0.5 --budget-minutes 5 -- --batch-size-per-device 256

User mistakes: one line on stderr, exit 2, before any run starts.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from common.config import BenchConfig
from common.errors import EXIT_USAGE, OneLineParser, UsageError, exit_on_usage_error
from common.option_fields import add_options, from_args
from experiment import launch, plans
from experiment.inputs import (
    ARM_SETTINGS,
    check_out,
    check_python,
    check_runner_options,
    check_runners,
    take_folder,
)
from experiment.labelled_arms import DEFAULT_ARMS, check_arms, label_arms, parse_arms, with_envs
from experiment.options import (
    ExperimentOptions,
    changed,
    check,
    check_blocks,
    default_repeats,
)
from experiment.run import Experiment
from experiment.settings import PROFILE_RUNS, PROG, Settings, check_placeholders
from stats.stopping import FIRST_STAGE_BLOCKS

FORBIDDEN = ("--output", "--overwrite-output")


def build_parser() -> argparse.ArgumentParser:
    """Every option of the command (experiment.options' fields), with its help text."""
    p = OneLineParser(
        prog=PROG,
        allow_abbrev=False,
        usage="python -m experiment [OPTIONS] [-- RUNNER OPTIONS]",
        description="Run a paired experiment: every arm with identical runner options (those after"
        " --), each run a fresh process, in blocks: ABBA for two arms (block 1 in the given"
        " order, block 2 reversed, ...), for more a cycle of Williams orders in which every arm"
        " follows every arm equally often (stats/orders.py). Leaves one folder: results/, logs/,"
        " manifest.json, report.txt, report.md, comparison.png.",
        epilog="Placeholders in runner options, filled in per run: {out} (the folder), {label},"
        " {repeat}, {run} (= {label}-r{repeat}; {label}-w{k} for the k-th warm-up run, whose"
        " {repeat} is k); name per-run files by {run}, e.g. --pyprofile"
        " {out}/pyprofile/{run}.pstats."
        " Exit status: 0 when every run and the report succeeded; 1 when a run or compare failed"
        " (the others are kept); 2 for a usage error (also when a run exits 2); 130/143 when"
        " stopped by SIGINT/SIGTERM.",
    )
    add_options(p, ExperimentOptions)
    return p


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(own options, runner options after --)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def check_shared(args: ExperimentOptions, runner: list[str]) -> None:
    """What every experiment checks of its own options and of the runner options, the
    in-process plan's too: the bounds, no --output (the folder names each run's), no option
    that ends every run without a result, only known placeholders, an interpreter that exists;
    UsageError."""
    check(args)
    for opt in runner:
        if opt.split("=")[0] in FORBIDDEN:
            raise UsageError(
                f"runner option {opt}: results go into the experiment folder; use --out DIR"
            )
    check_placeholders(runner)
    check_runner_options(runner)
    check_python(args.python)


def experiments(args: ExperimentOptions, runner: list[str], command: list[str]) -> list[Settings]:
    """The experiments to run, validated; UsageError on any mistake."""
    check_shared(args, runner)
    for opt in runner:
        if opt.split("=")[0] in ARM_SETTINGS:
            raise UsageError(
                f"runner option {opt}: it would make every arm another one, labelled as the"
                " arm it was; name each arm in --arms instead (e.g. --arms"
                " native,fabric-current-stream; the arms: common/arms.py)"
            )
    mode = launch.resolve_mode(args.launch)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    adaptive = args.target_half_width is not None
    common = dict(
        python=args.python,
        launch=mode,
        warmup_runs=args.warmup_runs,
        target_half_width=args.target_half_width,
        budget_minutes=args.budget_minutes,
        first_stage_blocks=args.first_stage_blocks or FIRST_STAGE_BLOCKS,
        settle_minutes=args.settle_minutes,
        command=command,
    )
    profile_runs = args.profile_runs or PROFILE_RUNS[0]
    if args.plan is None:
        if args.variant is not None:
            raise UsageError("--variant needs --plan")
        if args.envs is not None:
            raise UsageError("--envs needs --plan; name an arm's interpreter as RUNNER@PYTHON")
        arms = parse_arms(args.arms) if args.arms is not None else label_arms(list(DEFAULT_ARMS))
        arms = check_arms(arms, dict(os.environ))
        out = args.out or Path("out") / f"{'-'.join(a.label for a in arms)}-{stamp}"
        check_out(out)
        found = [
            Settings(
                out=out,
                arms=arms,
                options=runner,
                repeats=args.repeats or default_repeats(len(arms), adaptive),
                run_timeout=args.run_timeout,
                profile_runs=profile_runs,
                **common,
            )
        ]
    else:
        if args.arms is not None:
            raise UsageError("--arms and --plan: a plan names its own arms")
        plan = plans.find(args.plan)
        variants = [v for v in plan.variants if args.variant in (None, v.name)]
        if not variants:
            raise UsageError(
                f"--variant: plan {plan.name} has no variant '{args.variant}';"
                f" choose from {', '.join(v.name for v in plan.variants)}"
            )
        check_gpu_plan(plan, [[*plan.options, *v.options, *runner] for v in variants])
        root = args.out or Path("out") / f"{plan.name}-{stamp}"
        check_out(root)
        found = []
        for v in variants:
            options = [*plan.options, *v.options, *runner]
            check_placeholders(options)
            check_runner_options(options)
            arms = with_envs(list(v.arms or plan.arms), args.envs, args.python, plan.name)
            found.append(
                Settings(
                    out=root / v.name if v.name else root,
                    arms=check_arms(arms, {**os.environ, **v.env}),
                    options=options,
                    # with --target-half-width Stein's rule, not the plan's fixed design, decides
                    repeats=args.repeats or default_repeats(len(arms), adaptive, plan.repeats),
                    experiment=f"{plan.name}/{v.name}" if v.name else plan.name,
                    run_timeout=args.run_timeout or v.run_timeout,
                    allow_mismatch=plan.allow_mismatch,
                    env=dict(v.env),
                    profile_runs=args.profile_runs or plan.profile_runs,
                    **common,
                )
            )
    for s in found:
        if s.target_half_width is not None:
            check_blocks(s.repeats, s.first_stage_blocks)
        if s.profile_runs != "all" and any(o.split("=")[0] == "--trace" for o in s.options):
            raise UsageError("--trace records every run's profiled steps: give --profile-runs all")
        if mode == "srun":
            if any(a.launch for a in s.arms):
                raise UsageError(
                    f"--plan {args.plan}: its arms fork or start runs on this host, not through"
                    " srun; run it outside a Slurm job step or give --launch fork"
                )
            launch.srun_options(s.options)
        if any((a.launch or s.launch) == "fork" for a in s.arms):
            launch.check_fork_options(s.options)
    return found


def check_gpu_plan(plan: plans.Plan, options: list[list[str]]) -> None:
    """UsageError naming the plan's CPU counterpart (PLAN-cpu, where there is one) when the plan
    would run on GPUs (a variant's --accelerator, the runners' default) and CUDA is not
    available here: the runners' own advice, --accelerator cpu, would run the GPU plan's
    arms and sizes on CPUs, which its CPU counterpart chose for them."""
    cpu = next((p.name for p in plans.PLANS if p.name == f"{plan.name}-cpu"), None)
    if cpu is None:
        return
    early = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    early.add_argument("--accelerator", default=BenchConfig.accelerator)
    if all(early.parse_known_args(o)[0].accelerator != "gpu" for o in options):
        return
    from common.gpus import cuda_capabilities  # asked of the driver, as the runners ask it

    if not cuda_capabilities():
        raise UsageError(
            f"--plan {plan.name} runs on GPUs and CUDA is not available here; on CPUs run"
            f" --plan {cpu}, its counterpart for CPU ranks"
        )


def list_plans() -> None:
    """Every plan's name and question (and its variants)."""
    width = max(len(p.name) for p in plans.PLANS)
    for plan in plans.PLANS:
        variants = f" [{', '.join(v.name for v in plan.variants)}]" if plan.variants[0].name else ""
        print(f"{plan.name:<{width}}  {plan.question}{variants}")


# Options of separate-process experiments that an in-process plan does not take.
IN_PROCESS_REFUSES = (
    "envs",
    "warmup_runs",
    "target_half_width",
    "first_stage_blocks",
    "settle_minutes",
    "budget_minutes",
    "run_timeout",
    "launch",
    "profile_runs",
)


def _in_process(args: ExperimentOptions, runner: list[str], command: list[str]) -> int:
    """A plan of the interleaved mode (experiment/in_process.py)."""
    from experiment import in_process

    with exit_on_usage_error(PROG):
        check_shared(args, runner)  # --repeats 0 or below, -- --help, --python ... among them
        flag = changed(args, IN_PROCESS_REFUSES)
        if flag is not None:
            raise UsageError(
                f"{flag} does not apply to plan {args.plan}: its repeats are processes of"
                " the interleaved mode, which sets its own runs (--runs after --)"
            )
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = args.out or Path("out") / f"{args.plan}-{stamp}"
    plan = plans.find(args.plan)
    return in_process.main(
        plan, args.variant, runner, out, args.python, args.repeats or plan.repeats, command
    )


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status. A user mistake (argparse's or a UsageError)
    ends it with one line and exit status 2, before any run starts."""
    started = time.monotonic()  # the first experiment's clock (--budget-minutes) starts here
    argv = sys.argv[1:] if argv is None else argv
    own, runner = split_argv(argv)
    args = from_args(ExperimentOptions, build_parser().parse_args(own))
    if args.list_plans:
        list_plans()
        return 0
    if args.plan is not None and not args.arms:
        with exit_on_usage_error(PROG):
            in_process = plans.find(args.plan).in_process
        if in_process:
            # the interleaved mode: one process per repeat
            return _in_process(args, runner, ["python", "-m", "experiment", *argv])
    pool = launch.ServerPool()  # the fork servers the checks run in, adopted by the experiments
    try:
        try:
            with exit_on_usage_error(PROG):
                found = experiments(args, runner, ["python", "-m", "experiment", *argv])
                check_runners(found, pool)  # what a rank would refuse, before any run
        except KeyboardInterrupt:  # Ctrl-C before the first run: nothing was started or written
            return 128 + signal.SIGINT
        status = 0
        for k, s in enumerate(found):
            with exit_on_usage_error(PROG):
                take_folder(s.out)
            code = Experiment(s, pool, started if k == 0 else None).run()
            if code in (EXIT_USAGE, 130, 143):
                return code
            status = status or code
        return status
    finally:
        pool.close()  # what no experiment adopted
