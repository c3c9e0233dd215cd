"""`python -m experiment --plan in-process`: the interleaved mode's repeats, one process each.

    python -m experiment --plan in-process --variant fabric-vs-native -- --devices 1

Each repeat runs `python -m lightning_impl.interleaved` (both loops in one process) with the
plan's options, writing DIR/<variant>/results/interleaved-r<k>.json; at the end
compare.interleaved's report goes to DIR/<variant>/report.txt (and .md) and stdout. Every variant's
options are checked first (`--check`: one line, exit 2, before any run). Nothing here imports
torch or Lightning: the runs are subprocesses.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from common.errors import UsageError, exit_on_usage_error
from common.output import write_text
from compare.interleaved import analyse, load_interleaved_files, render_section
from experiment.inputs import check_out
from experiment.plans import Plan

MODULE = "lightning_impl.interleaved"


def run_plan(
    plan: Plan, variant: str | None, runner: list[str], out: Path, python: str, repeats: int
) -> int:
    """Check every variant, then run its repeats and write its section; the exit status."""
    variants = [v for v in plan.variants if variant in (None, v.name)]
    if not variants:
        raise UsageError(
            f"--variant: plan {plan.name} has no variant '{variant}';"
            f" choose from {', '.join(v.name for v in plan.variants)}"
        )
    check_out(out)
    commands = {
        v.name: [python, "-m", MODULE, *plan.options, *v.options, *runner] for v in variants
    }
    for name, cmd in commands.items():
        check = subprocess.run([*cmd, "--check"], capture_output=True, text=True)
        if check.returncode:
            line = (check.stderr.strip().splitlines() or ["failed"])[-1]
            raise UsageError(f"variant {name}: {line}")
    status = 0
    for name, cmd in commands.items():
        folder = out / name
        (folder / "results").mkdir(parents=True, exist_ok=True)
        paths = []
        for k in range(1, repeats + 1):
            path = folder / "results" / f"interleaved-r{k}.json"
            print(f"{plan.name}/{name}: repeat {k}/{repeats}", flush=True)
            if subprocess.run([*cmd, "--output", str(path)]).returncode == 0:
                paths.append(path)
            else:
                status = 1
        if paths:
            answer = analyse(load_interleaved_files(paths))
            write_text(folder / "report.txt", render_section(answer), mode="new")
            write_text(folder / "report.md", render_section(answer, "markdown"), mode="new")
            print(render_section(answer), end="", flush=True)
    return status


def main(plan: Plan, variant: str | None, runner: list[str], out: Path, python: str, repeats: int):
    """run_plan with a user's mistake as one line and exit status 2."""
    with exit_on_usage_error("experiment"):
        return run_plan(plan, variant, runner, out, python, repeats)


if __name__ == "__main__":  # pragma: no cover - entered through python -m experiment
    sys.exit(2)
