"""Warnings as typed values, and the per-run flags: host-bound runs, unsynchronised parameters,
per-step syncs, slow ranks, steady state.

    warnings, notes = run_flags(runs)     # [Flag(kind="host-bound", file=..., arm=..., ...)]
    slow = slow_ranks(runs)               # distributions.slow_ranks applied to every run's ranks
    steady = steady_states(runs)          # first vs second half of every run's timed steps

A `Flag` keeps its numbers apart from its words, so that `grouped_warnings` (here, beside the
templates it fills) shows the flags of one kind and arm as one line with the numbers as ranges,
without reading finished text back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from string import Formatter

from common.result import HOST_BOUND_BELOW, Result, silent_counter
from compare.model import ORIGINAL_LABEL, Run
from stats import distributions


@dataclass(frozen=True)
class Flag:
    """One warning: its kind, the run file and arm it is about (None: about several runs), a
    `str.format` template, and the numbers (shown as ranges when grouped) and words it fills."""

    kind: str  # host-bound | unsynchronised | diagnostics | not-steady | jumped | workload
    # | environment | unpaired | method (a comparison's dropped blocks, fallbacks) | not-settled
    # | energy
    template: str  # "{name:spec}" for numbers and words; literal braces doubled
    numbers: dict[str, float] = field(default_factory=dict)
    words: dict[str, str] = field(default_factory=dict)
    file: str | None = None
    arm: str | None = None

    @classmethod
    def plain(cls, kind: str, text: str) -> Flag:
        """A warning about several runs, given as finished text."""
        return cls(kind, text.replace("{", "{{").replace("}", "}}"))

    @property
    def message(self) -> str:
        """The warning without the run file."""
        return self.template.format(**self.numbers, **self.words)

    @property
    def text(self) -> str:
        """The warning as one line: "file: message", or the message when about several runs."""
        return f"{self.file}: {self.message}" if self.file else self.message


def grouped_warnings(flags: Sequence[Flag]) -> list[str]:
    """Warnings of one kind about runs of one arm as one line: the numbers as ranges, then the
    runs.

    host-bound flags of n-r1.json (GPU busy 82%) and n-r2.json (89%) become
    "host-bound (GPU busy 82..89% ...) [2 runs: n-r1.json, n-r2.json]"; a warning about one
    run, or about several runs at once, stays as it is, in its order.
    """
    groups: dict[object, list[Flag]] = {}
    for i, flag in enumerate(flags):
        key = (
            (flag.kind, flag.arm, flag.template, tuple(sorted(flag.words.items())))
            if flag.file
            else i
        )
        groups.setdefault(key, []).append(flag)
    out = []
    for members in groups.values():
        if len(members) == 1:
            out.append(members[0].text)
            continue
        numbers = {
            name: _range([m.numbers[name] for m in members], spec)
            for _, name, spec, _ in Formatter().parse(members[0].template)
            if name in members[0].numbers
        }
        text = members[0].template.format(
            **{name: _Literal(value) for name, value in numbers.items()}, **members[0].words
        )
        runs = sorted((m.file or "" for m in members), key=_natural)
        out.append(f"{text} [{len(members)} runs: {', '.join(runs)}]")
    return out


class _Literal(str):
    """Text that a format spec leaves as it is (a range already formatted)."""

    def __format__(self, spec: str) -> str:
        return str(self)


def _range(values: list[float], spec: str | None) -> str:
    """'lo..hi' of the values in `spec` (a unit after the number written once), or one value."""
    low, high = format(min(values), spec or ""), format(max(values), spec or "")
    if low == high:
        return low
    n = 0  # characters of a unit both end with ("%"), written once
    while (
        n < min(len(low), len(high)) and low[-1 - n] == high[-1 - n] and not low[-1 - n].isdigit()
    ):
        n += 1
    return f"{low[: len(low) - n]}..{high}"


def _natural(name: str) -> list[object]:
    """native-r2 before native-r10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


@dataclass(frozen=True)
class SlowRank:
    """A rank whose median step time stands out above the other ranks' of its run."""

    file: str
    arm: str
    rank: int
    hostname: str
    median_ms: float
    run_median_ms: float  # median of all ranks' medians


def run_flags(runs: Sequence[Run]) -> tuple[list[Flag], list[str]]:
    """Per-run warnings (host-bound, unsynchronised parameters, diagnostic runs) and notes
    (per-step syncs, originals)."""
    warnings, notes = [], []
    sigterm: dict[str, list[str]] = {}
    for run in runs:
        about = {"file": run.file, "arm": run.label}
        if not run.parameters_synchronized:
            warnings.append(
                Flag(
                    "unsynchronised",
                    "parameters are NOT synchronised across ranks"
                    " (max checksum difference {difference:g})",
                    {"difference": run.parameter_checksum_max_difference},
                    **about,
                )
            )
        if run.duplicate_of is not None:
            warnings.append(
                Flag(
                    "duplicate",
                    "is a copy or hard link of {twin}, not a run of its own: no verdict",
                    words={"twin": run.duplicate_of},
                    **about,
                )
            )
        if run.diagnostics:
            switches = ", ".join(f"{k}={v}" for k, v in run.diagnostics.items())
            warnings.append(
                Flag(
                    "diagnostics",
                    "ran with diagnostic switches ({switches}): a diagnosis, not a measurement",
                    words={"switches": switches},
                    **about,
                )
            )
        if run.gpu_share is not None and run.gpu_share < HOST_BOUND_BELOW:  # None: no verdict
            warnings.append(
                Flag(
                    "host-bound",
                    "host-bound (GPU busy {share:.1%} of the timed step): the GPU waits"
                    " for the host, so per-step framework cost shows up directly in step time",
                    {"share": run.gpu_share},
                    **about,
                )
            )
        jump = distributions.mid_run_jump(run.step_series_ms or [])
        if jump is not None:
            warnings.append(
                Flag(
                    "jumped",
                    "steps jumped mid-run: {share:.0%} of the timed steps ran"
                    f" {distributions.JUMP_EXCESS:.0%}+ above the run's own level (up to"
                    " {peak:+.0f}%), {stretch:.0f} in a row from step {start:.0f}: something"
                    " outside the run slowed it (why runs spread names what moved with it)",
                    {
                        "share": jump.share,
                        "peak": jump.peak_percent,
                        "stretch": jump.stretch,
                        "start": jump.start,
                    },
                    **about,
                )
            )
        silent = silent_counter(run.result) if isinstance(run.result, Result) else None
        if silent is not None:  # compare.load made its energy unavailable
            warnings.append(
                Flag(
                    "energy",
                    "the GPU energy counter of rank {rank} did not tick in the timed window"
                    " (0 J): no {energy} for this run; more --steps give the counter time to tick",
                    words={"rank": str(silent), "energy": run.unit.energy},
                    **about,
                )
            )
        if run.sigterm_sync is not None:
            sigterm.setdefault(run.sigterm_sync, []).append(run.file)
    for version, files in sigterm.items():
        notes.append(
            f"Lightning {version} broadcasts a SIGTERM flag and reads it with .item()"
            f" every step (a host-device sync per step): {', '.join(files)}"
        )
    if any(run.original for run in runs):
        notes.append(
            f"Results marked {ORIGINAL_LABEL} have no per-step times: their step time is"
            " the wall-clock mean (milliseconds_per_step), their throughput is wall-clock,"
            " they have no p5/p95, warm-up or first-step time; comparisons with them use"
            " every run's wall-clock mean on both sides"
        )
    return warnings, notes


def slow_ranks(runs: Sequence[Run]) -> list[SlowRank]:
    """Ranks flagged by distributions.slow_ranks in every run that has per-rank times."""
    found = []
    for run in runs:
        medians = [rank.median_ms for rank in run.ranks]
        for i in distributions.slow_ranks(medians) if medians else []:
            found.append(
                SlowRank(
                    run.file,
                    run.label,
                    run.ranks[i].rank,
                    run.ranks[i].hostname,
                    medians[i],
                    distributions.median(medians),
                )
            )
    return found


@dataclass(frozen=True)
class SteadyState:
    """A run's median step in the first and the second half of its timed steps (None: no
    step times)."""

    file: str
    arm: str
    world_size: int
    first_half_median_ms: float | None
    second_half_median_ms: float | None
    change_percent: float | None  # second half against first, in % of the first

    @property
    def steady(self) -> bool:
        """False when the halves differ by more than distributions.STEADY_STATE_TOLERANCE."""
        limit = distributions.STEADY_STATE_TOLERANCE * 100
        return self.change_percent is None or abs(self.change_percent) <= limit


def steady_states(runs: Sequence[Run]) -> list[SteadyState]:
    """First vs second half of each run's per-step series (slowest rank per step)."""
    found = []
    for run in runs:
        series = run.step_series_ms
        halves = (
            distributions.halves_change(series)
            if series is not None and len(series) >= 2
            else (None, None, None)
        )
        found.append(SteadyState(run.file, run.label, run.world_size, *halves))
    return found


def steady_state_warnings(states: Sequence[SteadyState]) -> list[Flag]:
    """A warning for each run whose timed steps were still speeding up or slowing down."""
    template = (
        "not in steady state: the median step of the second half of the timed steps is"
        " {change:+.1f}% against the first half's"
        f" (limit ±{distributions.STEADY_STATE_TOLERANCE:.0%}); raise --warmup-steps"
    )
    return [
        Flag("not-steady", template, {"change": s.change_percent}, file=s.file, arm=s.arm)
        for s in states
        if not s.steady and s.change_percent is not None
    ]
