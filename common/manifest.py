"""An experiment folder's manifest.json: its model, its published schema, its reader and writer.

    manifest = load_manifest(Path("out/exp/manifest.json"))   # ResultError naming file and field
    write_manifest(manifest, Path("out/exp/manifest.json"))   # common.output, mode "replace"

`python -m experiment` rewrites the manifest after every run; compare reads the runs with status
"ok" from it, with their arm labels, blocks and positions. The schema is published as
schema/manifest.schema.json (`python -m common manifest-schema`). Manifests written before the
model existed still load: an arm's or a run's runner was then called "arm".
Imports neither torch nor lightning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from common.bounds import out_of_bounds
from common.output import write_text
from common.result import ResultError, field_error, read_json

MANIFEST_VERSION = 1
MANIFEST = "manifest.json"  # its name in an experiment folder
# The runner of the in-process plan's one arm: both loops in one process (experiment/in_process.py)
INTERLEAVED_RUNNER = "interleaved"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


def _runner_was_arm(data: Any) -> Any:
    """Older manifests call the runner "arm"; read it as "runner"."""
    if isinstance(data, dict) and "arm" in data and "runner" not in data:
        data = {("runner" if key == "arm" else key): value for key, value in data.items()}
    return data


class ManifestArm(_Strict):
    """One arm: its label, the runner it starts, that runner's argv and the interpreter."""

    label: str = Field(min_length=1)
    # native, fabric, lightning, lightning-services; or INTERLEAVED_RUNNER
    runner: str = Field(min_length=1)
    argv: list[str]  # after the interpreter, before the shared runner options
    python: str | None = None  # the interpreter; absent in older manifests

    _old_names = model_validator(mode="before")(_runner_was_arm)


class ManifestRun(_Strict):
    """One run of an arm: where it sat in the design, how it ended, where its files are."""

    index: int = Field(ge=1)  # order of the runs, from 1
    block: int = Field(ge=0)  # ABBA block, from 1; 0 for warm-up runs
    position: int = Field(ge=1)  # place within the block, from 1
    label: str = Field(min_length=1)
    runner: str = Field(min_length=1)
    repeat: int | None = Field(ge=1)  # the block of a counted run; None for a warm-up run
    warmup: int | None = Field(default=None, ge=1)  # k of the k-th warm-up run, else None
    command: list[str]
    result: str | None  # relative to the folder; None unless the run wrote one
    log: str
    status: Literal["ok", "warmup", "failed"]
    exit_status: int
    started_utc: str
    finished_utc: str
    seconds: float = Field(ge=0)
    # A run with --compile: its graphs loaded from the experiment's compile cache (hit), all
    # compiled (miss) or some of each (common.result.CompileCache); absent otherwise
    compile_cache: Literal["hit", "miss", "partial"] | None = None

    _old_names = model_validator(mode="before")(_runner_was_arm)

    @model_validator(mode="after")
    def _ok_has_result(self) -> ManifestRun:
        if self.status == "ok" and not self.result:
            raise ValueError("a run with status ok needs a result path")
        return self


# What stats.settling's rule saw: its Settling.seen
SettlingSeen = Literal["settled", "drift", "noise", "too-few", "heating", "unknown"]


class ManifestSettling(_Strict):
    """How the experiment waited for a settled host before its counted runs:
    uncounted warm-up runs of the baseline until stats.settling.host_settled, within a
    bound."""

    settled: bool
    seconds: float = Field(ge=0)  # from the first warm-up run's start to the decision
    runs: int = Field(ge=0)  # the baseline's warm-up runs examined
    extra_runs: int = Field(ge=0)  # of those, the runs added to settle (beyond --warmup-runs)
    max_minutes: float = Field(gt=0)  # the user's bound (--settle-minutes)
    reason: str
    # what the rule saw last (stats.settling.Settling.seen); absent in older manifests
    seen: SettlingSeen | None = None

    @property
    def warming(self) -> bool:
        """Whether the host had settled but the GPU was still warming when the counted runs
        began (the rule's "heating")."""
        return not self.settled and self.seen == "heating"


class ManifestMakeup(_Strict):
    """A block run again after the planned ones because a run of it failed: its number, the
    block it makes up (in that block's order) and why."""

    block: int = Field(ge=1)
    replaces: int = Field(ge=1)
    reason: str


class ManifestStopping(_Strict):
    """How the experiment decided its number of blocks: `rule` is the adaptive rule
    (compare reads it to compute Stein's interval), None for fixed --repeats; the rest says why
    it stopped (absent while it runs), the make-up blocks it ran, and the balance for
    carry-over its blocks reached. Older manifests recorded only the outcome."""

    rule: Literal["stein-two-stage"] | None = None
    first_stage_blocks: int | None = Field(default=None, ge=2)
    target_half_width: float | None = Field(default=None, gt=0)  # percentage points
    max_blocks: int | None = Field(default=None, ge=1)
    budget_minutes: float | None = None
    reason: str | None = None
    complete_blocks: dict[str, int] | None = None  # per arm against the baseline, at the end
    blocks_needed: dict[str, int | None] | None = None  # per arm, from the rule's first stage
    makeup: list[ManifestMakeup] | None = None  # blocks that lost a run, run again (fixed design)
    # the blocks of one cycle over which every arm follows every arm equally often
    # (stats.orders), and the most two arms differ in how often they ran right after one arm
    # over the blocks run (0: balanced; whole cycles, or ABBA)
    cycle_blocks: int | None = Field(default=None, ge=1)
    carry_over_imbalance: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _rule_is_complete(self) -> ManifestStopping:
        if self.rule is not None and (
            self.first_stage_blocks is None or self.target_half_width is None
        ):
            raise ValueError("a stopping rule needs first_stage_blocks and target_half_width")
        return self


class Manifest(_Strict):
    """The record of one experiment: its command, arms, options and every run so far."""

    manifest_version: Literal[1]
    experiment: str | None  # the plan (and variant) it ran, or None
    created_utc: str
    command: list[str]
    baseline: str
    arms: list[ManifestArm] = Field(min_length=1)
    runner_options: list[str]
    runs: list[ManifestRun]
    # How the experiment waited for a settled host, and why it stopped (absent in older ones).
    settling: ManifestSettling | None = None
    stopping: ManifestStopping | None = None

    @property
    def interleaved(self) -> bool:
        """A folder of the interleaved mode (one arm, runner INTERLEAVED_RUNNER): its results
        answer their own question (compare.interleaved), never mixed with separate runs."""
        return self.arms[0].runner == INTERLEAVED_RUNNER

    @model_validator(mode="after")
    def _one_kind(self) -> Manifest:
        runners = {a.runner for a in self.arms} | {r.runner for r in self.runs}
        if INTERLEAVED_RUNNER in runners and runners != {INTERLEAVED_RUNNER}:
            raise ValueError(
                f"runner {INTERLEAVED_RUNNER!r} (both loops in one process) is never mixed with"
                " runners of separate processes in one experiment"
            )
        return self


def load_manifest(path: Path) -> Manifest:
    """Read and validate a manifest; ResultError naming the file and the first bad field."""
    data = read_json(path)
    if isinstance(data, dict) and isinstance(data.get("manifest_version"), bool):  # True == 1
        raise ResultError(
            f"{path}: manifest_version {data['manifest_version']!r} is not a version (this suite"
            " reads 1)"
        )
    try:
        manifest = Manifest.model_validate(data, strict=True)
    except ValidationError as error:
        raise ResultError(
            f"{path}: not a valid experiment manifest: {field_error(error)}"
        ) from None
    problem = out_of_bounds(manifest.model_dump()) or layout_problem(manifest.runs)
    if problem is not None:
        raise ResultError(f"{path}: not a valid experiment manifest: {problem}")
    return manifest


def layout_problem(runs: list[ManifestRun]) -> str | None:
    """Why the runs cannot be the experiment's design, or None: a warm-up run sits in block 0,
    a counted run in a block from 1, and a block's counted runs at positions 1..k, one arm label
    each (the pairing by block and the order term read them; a hand-edited manifest may not)."""
    blocks: dict[int, list[tuple[int, ManifestRun]]] = {}
    for i, run in enumerate(runs):
        if (run.warmup is None) != (run.block >= 1):
            kind = "a counted run" if run.warmup is None else "a warm-up run"
            where = "a block from 1" if run.warmup is None else "block 0"
            return f"field runs.{i}.block: {run.block} for {kind}, which sits in {where}"
        if run.block >= 1:
            blocks.setdefault(run.block, []).append((i, run))
    for block, members in blocks.items():
        labels = [run.label for _, run in members]
        twice = next((label for label in labels if labels.count(label) > 1), None)
        if twice is not None:
            i = [k for k, run in members if run.label == twice][1]
            return f"field runs.{i}.label: block {block} holds two runs of {twice!r}"
        positions = sorted(run.position for _, run in members)
        if positions != list(range(1, len(members) + 1)):
            i = members[0][0]
            return (
                f"field runs.{i}.position: block {block}'s runs sit at positions"
                f" {', '.join(map(str, positions))}, not 1..{len(members)} once each"
            )
    return None


def write_manifest(manifest: Manifest, path: Path) -> None:
    """Replace the manifest at `path` atomically (common.output, mode "replace")."""
    text = json.dumps(manifest.model_dump(mode="json"), indent=2, allow_nan=False) + "\n"
    write_text(path, text, mode="replace", option="manifest")
