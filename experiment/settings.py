"""One experiment, fully resolved: its `Settings`, and what each of its runs is given.

    s = Settings(out=Path("out/x"), arms=label_arms(["native", "lightning"]), options=[...],
                 repeats=3, python=sys.executable, launch="fork")
    expand(s.options, s.out, "native", 2)          # {out}, {label}, {repeat}, {run} filled in
    run_environment(s); fork_modules(s)            # a run's environment; the fork servers wanted

The command line (experiment.cli) or a plan (experiment.plans) builds the settings; the
schedules (experiment.schedules) and the recorder (experiment.recorder) read them. Imports
neither torch nor lightning.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import UsageError
from experiment import launch
from experiment.labelled_arms import LabelledArm
from stats import stopping

PROG = "experiment"
# Settling: after the --warmup-runs rounds, more uncounted runs of the baseline
# until stats.settling.host_settled, for at most this many minutes of warm-up in all.
SETTLE_MINUTES = 3.0
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
PLACEHOLDERS = ("out", "label", "repeat", "run")
# The runner option of the profiled window after the timed steps (GPU busy share): with
# --profile-runs first, every run but each arm's first counted one gets it as 0, since the
# profiler's window costs a forked run a sixth of its seconds and measures nothing it needs.
PROFILE_STEPS = "--profile-steps"
PROFILE_RUNS = ("first", "all")  # --profile-runs' choices; the first is the default


def check_placeholders(options: list[str]) -> None:
    """UsageError naming a {placeholder} that is not one of PLACEHOLDERS."""
    for opt in options:
        for name in PLACEHOLDER.findall(opt):
            if name not in PLACEHOLDERS:
                raise UsageError(
                    f"runner option '{opt}': unknown placeholder {{{name}}};"
                    f" use {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
                )


def expand(
    options: list[str], out: Path, label: str, repeat: int, warmup: bool = False
) -> list[str]:
    """Options with {out}, {label}, {repeat}, {run} (= LABEL-rK) filled in for one run.

    For the k-th warm-up run {repeat} is k (a number, as options such as --seed need) and {run}
    is LABEL-wK: files named by {run} never take the name of a counted run's."""
    values = {
        "out": str(out),
        "label": label,
        "repeat": str(repeat),
        "run": f"{label}-{'w' if warmup else 'r'}{repeat}",
    }
    return [PLACEHOLDER.sub(lambda m: values[m.group(1)], opt) for opt in options]


@dataclass
class Settings:
    """One experiment, fully resolved (the CLI or a plan builds it)."""

    out: Path
    arms: list[LabelledArm]
    options: list[str]
    repeats: int
    python: str
    launch: str
    warmup_runs: int = 0
    experiment: str | None = None
    target_half_width: float | None = None
    budget_minutes: float | None = None
    first_stage_blocks: int = stopping.FIRST_STAGE_BLOCKS  # Stein's rule, with target_half_width
    settle_minutes: float = SETTLE_MINUTES  # 0: no settling
    run_timeout: float | None = None
    # first: each arm's first counted run profiles; all: every run
    profile_runs: str = PROFILE_RUNS[0]
    allow_mismatch: bool = False  # a plan's: compare arms whose workloads differ
    env: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)


def arm_mode(s: Settings, arm: LabelledArm) -> str:
    """How an arm's runs start: its own launch (the fork-check plan) or the experiment's."""
    return arm.launch or s.launch


def run_environment(s: Settings) -> dict[str, str]:
    """The environment of every run (and of the fork servers)."""
    env = launch.srun_environment() if s.launch == "srun" else dict(os.environ)
    env.update(s.env)
    return env


# Where torch.compile keeps what it compiled (torch._inductor's on-disk caches)
COMPILE_CACHE = "TORCHINDUCTOR_CACHE_DIR"
# What torch.compile imports at its first call (TorchDynamo and Inductor: seconds a run, paid by
# every forked run of a compiling experiment unless its fork server imported it once)
COMPILE_MODULES = ("torch._inductor.compile_fx",)


def compiles(s: Settings) -> bool:
    """Whether the experiment's runs compile their model (--compile, for every arm or one)."""
    return "--compile" in s.options or any("--compile" in arm.argv for arm in s.arms)


def fork_modules(s: Settings) -> dict[str, list[str]]:
    """The fork servers an experiment needs: arm interpreter -> the modules it warms (the
    runners', and torch.compile's where the runs compile)."""
    modules: dict[str, set[str]] = {}
    for arm in s.arms:
        if arm_mode(s, arm) == "fork":
            module, _ = launch.fork_target(arm.argv)
            modules.setdefault(arm.python or s.python, set()).add(module)
    extra = list(COMPILE_MODULES) if compiles(s) else []
    return {python: sorted(names) + extra for python, names in modules.items()}
