"""The schedule's side of the statistics (experiment.schedules, experiment.options): how many
blocks an experiment runs, in which orders, what it does for a block that lost a run, and what
its manifest and report say of the balance it reached.

- Blocks: without --repeats, 3 or more arms run one whole carry-over-balanced cycle (2 x arms
  blocks: tests/test_stats_orders.py simulates why), two arms 3, a plan its own; with
  --target-half-width Stein's rule may use the adaptive maximum (20), which a plan's fixed
  design must not cap (it did: "complete/needed blocks: fabric 5/13"); an explicit --repeats
  still caps it.
- Make-up blocks: in a fixed design a block that lost a run is run again once, in its order,
  after the planned blocks, and the manifest's `stopping.makeup` says which and why
  (tests/test_stats_residual.py simulates what it restores); not for an arm every run of which
  failed, nor under Stein's rule (it counts complete blocks itself).
- Balance: the manifest's `stopping` records the cycle's length and how far the blocks run are
  from balancing carry-over; the report names each comparison the blocks do not balance.
The experiments run the fake runner (tests/experiment_fake_runner.py): about 10-20 s each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_experiment import experiment

from common.config import from_args
from experiment import cli, plans
from experiment.options import ADAPTIVE_MAX_BLOCKS, ExperimentOptions, default_repeats


def settings(argv: list[str], tmp_path: Path) -> list:
    """The experiments `python -m experiment ARGV` would run (validated, nothing started)."""
    own, runner = cli.split_argv([*argv, "--out", str(tmp_path / "new")])
    args = from_args(ExperimentOptions, cli.build_parser().parse_args(own))
    return cli.experiments(args, runner, ["python", "-m", "experiment", *argv])


@pytest.mark.parametrize(
    ("argv", "repeats"),
    [
        (["--arms", "native,lightning"], 3),
        (["--arms", "native,fabric,lightning"], 6),  # one cycle of 3 arms
        (["--arms", "all"], 8),  # 4 arms
        (["--arms", "native,fabric,lightning", "--repeats", "4"], 4),
        (["--plan", "gpt", "--variant", "gpu-bound"], 5),  # a plan's own
        # Stein's rule: the adaptive maximum, whatever the plan's fixed design
        (["--plan", "gpt", "--variant", "gpu-bound", "--target-half-width", "0.5"], 20),
        (["--arms", "native,fabric,lightning", "--target-half-width", "0.5"], 20),
        # ... which an explicit --repeats still caps
        (
            [
                "--plan",
                "gpt",
                "--variant",
                "gpu-bound",
                "--target-half-width",
                "0.5",
                "--repeats",
                "7",
            ],
            7,
        ),  # fmt: skip
    ],
)
def test_the_blocks_an_experiment_runs(argv, repeats, tmp_path):
    assert ADAPTIVE_MAX_BLOCKS == 20
    assert [s.repeats for s in settings(argv, tmp_path)] == [repeats]


def test_the_responsibilities_plan_runs_eight_blocks_or_steins():
    """The plan (GPU only: refused here without CUDA) by the same rule: its 8 blocks, or with
    --target-half-width the adaptive maximum (tests/test_stats_residual.py says why 8)."""
    plan = plans.find("responsibilities")
    arms = len(plan.arms)
    assert arms == 7 and plan.repeats == 8
    assert default_repeats(arms, False, plan.repeats) == 8
    assert default_repeats(arms, True, plan.repeats) == ADAPTIVE_MAX_BLOCKS
    assert default_repeats(arms, False) == 14  # a whole cycle of 7 arms, without a plan


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def counted(m: dict) -> list[tuple[int, int, str, str]]:
    """(block, position, label, status) of every counted run."""
    return [(r["block"], r["position"], r["label"], r["status"]) for r in m["runs"] if r["repeat"]]


def test_a_block_that_lost_a_run_is_made_up_in_its_order(tmp_path):
    """3 arms, 3 blocks, fabric's run of block 2 fails: block 4 runs block 2's order, the
    manifest says why, and every comparison has 3 complete blocks again. The blocks are not a
    whole cycle: the manifest records the cycle (6) and the imbalance reached, and the report
    names the comparisons a carry-over would bias."""
    out = tmp_path / "exp"
    proc = experiment(
        ["--arms", "native,fabric,lightning", "--repeats", "3", "--warmup-runs", "1",
         "--settle-minutes", "0", "--out", str(out), "--", "--steps", "5"],
        tmp_path,
        FAKE_FAIL="fabric-r2",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    m = manifest(out)
    runs = counted(m)
    order = {b: [label for block, _, label, _ in runs if block == b] for b in (1, 2, 3, 4)}
    assert order[1] == ["native", "fabric", "lightning"]  # the best-balanced start of the cycle
    assert order[4] == order[2] == ["lightning", "native", "fabric"]
    assert [s for b, _, label, s in runs if s == "failed"] == ["failed"]
    stopping = m["stopping"]
    assert stopping["makeup"] == [
        {"block": 4, "replaces": 2, "reason": "a run failed: fabric (exit 3)"}
    ]
    assert stopping["reason"] == "3 block(s) done" and stopping["max_blocks"] == 3
    assert stopping["cycle_blocks"] == 6 and stopping["carry_over_imbalance"] >= 1
    assert "block 4 makes up block 2: its run of fabric (exit 3) failed" in proc.stdout
    report = (out / "report.txt").read_text()
    assert "fabric vs native, 1 GPU" in report and "3 runs a side" in report
    assert "not balanced for carry-over" in report


def test_no_make_up_for_a_broken_arm_or_under_steins_rule(tmp_path):
    out = tmp_path / "broken"
    proc = experiment(
        ["--repeats", "2", "--warmup-runs", "0", "--out", str(out)],
        tmp_path,
        FAKE_FAIL="lightning-r1,lightning-r2",
    )
    assert proc.returncode == 1
    m = manifest(out)
    assert len(counted(m)) == 4 and m["stopping"]["makeup"] is None
    assert m["stopping"]["carry_over_imbalance"] >= 0 and m["stopping"]["cycle_blocks"] == 2
    out = tmp_path / "stein"
    proc = experiment(
        ["--target-half-width", "50", "--first-stage-blocks", "2", "--repeats", "3",
         "--warmup-runs", "0", "--out", str(out)],
        tmp_path,
        FAKE_FAIL="lightning-r1",
    )  # fmt: skip
    assert proc.returncode == 1
    m = manifest(out)
    assert m["stopping"]["makeup"] is None and m["stopping"]["rule"] == "stein-two-stage"
    assert max(b for b, *_ in counted(m)) <= 3


def test_a_whole_cycle_is_balanced_and_says_so(tmp_path):
    out = tmp_path / "cycle"
    proc = experiment(
        ["--arms", "native,fabric,lightning", "--warmup-runs", "1", "--settle-minutes", "0",
         "--out", str(out)],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    m = manifest(out)
    assert max(b for b, *_ in counted(m)) == 6  # the default: one cycle
    assert m["stopping"]["cycle_blocks"] == 6 and m["stopping"]["carry_over_imbalance"] == 0
    assert "not balanced for carry-over" not in (out / "report.txt").read_text()
