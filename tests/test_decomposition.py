"""Where the cost comes from (compare.decomposition): which arms measure what, exact arithmetic,
and the method checked by simulation.

The simulation runs experiments as python -m experiment does (every arm once a block, in the
given order in odd blocks and reversed in even ones) with known costs that add milliseconds:
native 100 ms; Fabric adds launch 0 (a no-op ablation: its A/A), its stream 1.5, precision 4.0
and its wrappers 1.0 ms; the Trainer's loop 1.0 and its services 4.0 more. Each run's number
has log-normal noise (0.4%), a block effect shared by the runs of a block (1%) and a drift of
0.2% per run slot. REPS experiments of 6 blocks per condition, seeded; the MC SE of a rate near
95% is 0.69 points. Coverage of each of the ten rows' true cost (the residual's: 0) must hold
at 95% within 3 SE (ten rates looked at; simulated: 0.937 to 0.962 over four seeds), also when
one arm's runs are noisier (1.5%), and the no-op's false-verdict rate at 5% within 2 SE; under
heavy tails (a tenth of runs 5% slower) coverage is asked of 90% (simulated: 0.95 to 0.98). An
interaction the parts cannot see (2 ms of Fabric's that no ablation removes) must show in the
residual. Not covered: carry-over (a run 0.5% slower after a Trainer run) brings some rows to
0.85 under these reversed orders; orders balanced for carry-over are the schedule's to give.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from compare.decomposition import decompose, layout_of
from experiment import plans
from stats import intervals

REPS = 1000
MC_SE = math.sqrt(0.05 * 0.95 / REPS)
# The responsibilities plans' arms, read from the arms table (common/arms.py)
ONE_GPU = list(plans.ONE_GPU)
TWO_RANKS = [*ONE_GPU, *(a for a in plans.RESPONSIBILITY_ARMS if a not in ONE_GPU)]
# ms each responsibility adds (the truth of the simulation)
COST = {"launch": 0.0, "wrapper": 1.5, "precision": 4.0, "step": 1.0, "loop": 1.0, "services": 4.0}


def levels(unexplained: float = 0.0) -> dict[str, float]:
    """Each arm's step in ms: native, plus what it does Lightning's way."""
    fabric = 100.0 + COST["launch"] + COST["wrapper"] + COST["precision"] + COST["step"]
    fabric += unexplained
    return {
        "native": 100.0,
        "fabric": fabric,
        "lightning": fabric + COST["loop"],
        "lightning-services": fabric + COST["loop"] + COST["services"],
        "fabric-native-launch": fabric - COST["launch"],
        "fabric-current-stream": fabric - COST["wrapper"],
        "fabric-torch-autocast": fabric - COST["precision"],
        "fabric-raw-step": fabric - COST["step"],
        "lightning-no-sigterm": fabric + COST["loop"] - 0.5,  # half the loop: the broadcast
        "native-fp32-logits": 100.0 + 2.0,  # a piece of precision, native's way
    }


def experiment(
    rng: np.random.Generator,
    arms: list[str],
    blocks: int = 6,
    spikes: float = 0.0,
    unexplained: float = 0.0,
    noisy: str = "",
) -> list[intervals.RunPoint]:
    """One experiment's counted runs as compare sees them: one RunPoint per run (`noisy`: an
    arm whose runs vary 1.5% instead of 0.4%)."""
    level = levels(unexplained)
    points, slot = [], 0
    for block in range(1, blocks + 1):
        order = arms if block % 2 else arms[::-1]
        shared = rng.normal(0.0, 0.01)
        for position, arm in enumerate(order, 1):
            slot += 1
            noise = rng.normal(0.0, 0.015 if arm == noisy else 0.004)
            log_ms = math.log(level[arm]) + shared + 0.002 * slot + noise
            if rng.random() < spikes:
                log_ms += math.log(1.05)
            points.append(intervals.RunPoint(arm, math.exp(log_ms), block, position))
    return points


def truth(row) -> float:
    """The simulated cost of a row in % of native's step."""
    if row.kind == "residual":
        return 0.0
    if row.kind == "total":
        return levels()["lightning-services"] - 100.0
    if row.responsibility == "of which: native-fp32-logits":
        return 2.0
    if row.responsibility == "of which: lightning-no-sigterm":
        return 0.5
    key = {
        "launch and process group": "launch",
        "DDP wrapper and its stream": "wrapper",
        "mixed precision": "precision",
        "backward and step wrappers": "step",
        "the Trainer's loop": "loop",
        "the Trainer's services": "services",
    }[row.responsibility]
    return COST[key]


# --- which arms measure what ------------------------------------------------------------------


def test_one_gpu_says_why_the_launch_and_sigterm_ablations_are_left_out():
    layout = layout_of(ONE_GPU, "native", 1)
    assert layout is not None and layout.top == "lightning-services"
    missing = {i.named: i.why for i in layout.items if i.with_arm is None}
    assert set(missing) == {
        "launch and process group",
        "the Trainer's loop, of which lightning-no-sigterm",
    }
    assert all(why.startswith("not isolated here: ") for why in missing.values())
    assert "one rank starts no other process" in missing["launch and process group"]
    measured = [(i.title, i.measured) for i in layout.parts]
    assert measured == [
        ("DDP wrapper and its stream", "fabric-current-stream vs fabric"),
        ("mixed precision", "fabric-torch-autocast vs fabric"),
        ("backward and step wrappers", "fabric-raw-step vs fabric"),
        ("the Trainer's loop", "lightning vs fabric"),
        ("the Trainer's services", "lightning-services vs lightning"),
    ]


def test_two_ranks_measure_every_part_and_name_an_ablation_that_did_not_run():
    layout = layout_of(TWO_RANKS, "native", 2)
    assert layout is not None and all(i.with_arm is not None for i in layout.items)
    assert [i.title for i in layout.items if i.kind == "detail"] == [
        "of which: native-fp32-logits",
        "of which: lightning-no-sigterm",
    ]
    fewer = layout_of([a for a in TWO_RANKS if a != "fabric-raw-step"], "native", 2)
    assert fewer is not None
    [why] = [i.why for i in fewer.items if i.with_arm is None]
    assert why == "not measured here: no fabric-raw-step runs"


@pytest.mark.parametrize(
    "labels,baseline",
    [
        (["native", "fabric", "lightning", "lightning-services"], "native"),  # no ablation
        (["native", "lightning", "native-side-stream", "lightning-current-stream"], "native"),
        (["native", "native-fp32-logits"], "native"),  # no Lightning runner
        (ONE_GPU, "fabric"),  # a decomposition is against native
    ],
)
def test_reports_without_a_decomposition_stay_as_they_were(labels, baseline):
    assert layout_of(labels, baseline, 1) is None


# --- exact arithmetic -------------------------------------------------------------------------


def test_each_row_is_its_cost_in_percent_of_natives_step_and_they_add_up():
    """Noise-free runs (a tiny alternating jitter, so that intervals exist): every part is its
    ms over native's 100 ms, and the parts plus the residual are the total to rounding."""
    layout = layout_of(TWO_RANKS, "native", 2)
    assert layout is not None
    level = levels(unexplained=0.7)  # 0.7 ms of Fabric's no ablation removes
    points = [
        intervals.RunPoint(arm, level[arm] * (1 + 1e-6 * ((b + k) % 3)), b, k + 1)
        for b in range(1, 7)
        for k, arm in enumerate(TWO_RANKS if b % 2 else TWO_RANKS[::-1])
    ]
    found = decompose(layout, points, {}, None)
    rows = {r.responsibility: r for r in found.rows}
    assert rows["mixed precision"].percent == pytest.approx(4.0, abs=1e-3)
    assert rows["the Trainer's services"].percent == pytest.approx(4.0, abs=1e-3)
    assert rows["of which: native-fp32-logits"].percent == pytest.approx(2.0, abs=1e-3)
    assert rows["residual"].percent == pytest.approx(0.7, abs=1e-3)
    parts = sum(r.percent for r in found.rows if r.kind == "part")
    assert parts + rows["residual"].percent == pytest.approx(rows["total"].percent, abs=1e-6)
    assert rows["total"].ms == pytest.approx(rows["total"].percent * found.native_ms / 100)
    assert found.blocks == 6 and "remains" in found.residual_sentence


def test_a_block_missing_a_run_is_left_out_and_named():
    layout = layout_of(ONE_GPU, "native", 1)
    assert layout is not None
    points = experiment(np.random.default_rng(1), ONE_GPU)
    points = [p for p in points if not (p.block == 3 and p.arm == "fabric-raw-step")]
    found = decompose(layout, points, {}, None)
    assert found.blocks == 5 and found.dropped == (3,)


def test_what_a_rows_interval_says_of_itself_is_said_under_the_table():
    """Blocks 2, 4 and 6 lose a run: the complete blocks run 4:1 by order, so stats.blocks gives
    the plain mean and warns; the row keeps the warning and the section says it."""
    from types import SimpleNamespace

    from compare.sections import cost_sources

    layout = layout_of(ONE_GPU, "native", 1)
    assert layout is not None
    points = experiment(np.random.default_rng(2), ONE_GPU, blocks=8)
    points = [p for p in points if not (p.block in (2, 4, 6) and p.arm == "fabric-raw-step")]
    found = decompose(layout, points, {}, None)
    assert found.dropped == (2, 4, 6)
    row = next(r for r in found.rows if r.responsibility == "backward and step wrappers")
    [said] = [w for w in row.warnings if "the plain mean" in w]
    report = SimpleNamespace(decomposition=[found], unit="GPU(s)", units="ms/step")
    lines = cost_sources(report).lines  # type: ignore[arg-type]
    assert f"1 GPU, backward and step wrappers: {said}" in lines


def test_loose_files_get_no_decomposition_and_say_why():
    layout = layout_of(ONE_GPU, "native", 1)
    assert layout is not None
    points = [intervals.RunPoint(a, 100.0) for a in ONE_GPU]
    found = decompose(layout, points, {}, None)
    assert found.rows == () and "carry no blocks" in found.residual_sentence


# --- the method, by simulation ----------------------------------------------------------------


def simulate(arms: list[str], seed: int, **kw) -> tuple[dict[str, float], float]:
    """(coverage of each row's true cost, rate at which the no-op launch ablation got a
    verdict) over REPS experiments."""
    layout = layout_of(arms, "native", 2)
    assert layout is not None
    rng = np.random.default_rng(seed)
    covered: dict[str, int] = {}
    false = 0
    for _ in range(REPS):
        found = decompose(layout, experiment(rng, arms, **kw), {}, None)
        for row in found.rows:
            assert row.ci_low is not None and row.ci_high is not None, row
            covered[row.responsibility] = covered.get(row.responsibility, 0) + (
                row.ci_low <= truth(row) <= row.ci_high
            )
            if row.responsibility == "launch and process group":
                false += not row.ci_low <= 0.0 <= row.ci_high
    return {k: v / REPS for k, v in covered.items()}, false / REPS


@pytest.mark.parametrize("noisy", ["", "fabric"])
def test_parts_and_residual_are_covered_and_a_no_op_ablation_gets_no_verdict(noisy):
    coverage, false = simulate(TWO_RANKS, seed=4701, noisy=noisy)
    assert min(coverage.values()) >= 0.95 - 3 * MC_SE, coverage
    assert false <= 0.05 + 2 * MC_SE, false


def test_under_heavy_tails_coverage_holds_at_90_percent():
    coverage, false = simulate(TWO_RANKS, seed=4702, spikes=0.1)
    assert min(coverage.values()) >= 0.90, coverage
    assert false <= 0.10, false


def test_a_cost_no_ablation_removes_shows_in_the_residual():
    layout = layout_of(ONE_GPU, "native", 1)
    assert layout is not None
    rng = np.random.default_rng(4703)
    found = [
        decompose(layout, experiment(rng, ONE_GPU, unexplained=2.0), {}, None) for _ in range(100)
    ]
    rest = [d.rows[-1] for d in found]
    assert sum(r.ci_low <= 2.0 <= r.ci_high for r in rest) >= 90  # covered
    assert sum(r.ci_low > 0 for r in rest) >= 80  # and seen: the parts do not explain the total


# --- in a report ------------------------------------------------------------------------------


def _folder(tmp_path: Path, arms: list[str], rng: np.random.Generator) -> Path:
    """An experiment folder (results/, manifest.json) of these arms' simulated runs."""
    sys.path.insert(0, str(Path(__file__).parent))
    from common.arms import ARMS
    from compare_factory import make_result, write

    folder = tmp_path / "e"
    (folder / "results").mkdir(parents=True)
    entries = []
    for p in experiment(rng, arms):
        rel = f"results/{p.arm}-r{p.block}.json"
        arm = ARMS[p.arm]
        result = make_result(arm.runner, median_ms=p.ms, steps=20, seed=len(entries))
        write(folder / rel, result.model_copy(update={"arm": p.arm}))
        entries.append(
            {"index": len(entries) + 1, "block": p.block, "position": p.position,
             "label": p.arm, "runner": p.arm, "repeat": p.block, "command": [], "result": rel,
             "log": f"logs/{p.arm}-r{p.block}.log", "status": "ok", "exit_status": 0,
             "started_utc": "", "finished_utc": "", "seconds": 1.0}
        )  # fmt: skip
    manifest = {
        "manifest_version": 1, "experiment": "responsibilities/image", "created_utc": "",
        "command": [], "baseline": "native", "runner_options": [], "runs": entries,
        "arms": [{"label": a, "runner": a, "argv": list(ARMS[a].options)} for a in arms],
    }  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_the_report_states_where_the_cost_comes_from(tmp_path, capsys):
    from compare.api import ReportOptions, analyse_paths
    from compare.cli import main

    folder = _folder(tmp_path, ONE_GPU, np.random.default_rng(5))
    report = analyse_paths([folder], ReportOptions())
    [d] = report.decomposition
    # each ablation against its parent, each runner against native and its parent, the residual
    assert len(report.overhead) == 8 and d.family == 9
    assert all(o.family == 9 for o in report.overhead)
    assert [r.kind for r in d.rows][-2:] == ["total", "residual"]
    assert main([str(folder), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "\nWhere the cost comes from\n" in text
    assert f"where the cost comes from, 1 GPU: {d.residual_sentence[:40]}" in text
    assert "launch and process group: not isolated here: one rank" in text
    assert max(map(len, text.splitlines())) <= 100
    assert main([str(folder), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["decomposition"][0]["rows"]
    assert rows[-1]["responsibility"] == "residual" and rows[-1]["ci_low"] < 0 < rows[-1]["ci_high"]


def test_the_residual_explains_the_total_only_by_tost_within_one_point():
    """'Explained' is an equivalence claim: the residual's 90% interval (two one-sided tests at
    5%) within +-1 pp, not the row's (Holm-adjusted) interval."""
    import dataclasses

    from compare.decomposition import CostRow, residual_sentence

    base = CostRow(1, "residual", "residual", "residual", "residual", "", 0.2, -0.5, 0.9, 0.95,
                   None, None, None, None, None, None, 6)  # fmt: skip
    said = residual_sentence(base, (-0.4, 0.8))
    assert said.startswith("the parts explain the total: residual +0.20%")
    assert "its 90% interval -0.40..+0.80 lies within ±1 pp (two one-sided tests at 5%)" in said
    # the row's interval within 1 pp is not enough: the 90% interval decides
    assert "too wide to say the parts explain" in residual_sentence(base, (-0.4, 1.05))
    assert "too wide to say the parts explain" in residual_sentence(base)
    wide = dataclasses.replace(base, ci_low=-3.0, ci_high=3.4)
    assert "too wide to say the parts explain the total" in residual_sentence(wide, (-2.5, 2.9))
    small = dataclasses.replace(base, ci_low=0.1, ci_high=0.3)
    assert residual_sentence(small, (0.12, 0.28)).startswith("a residual of +0.20%")
    assert "its 90% interval +0.12..+0.28 within ±1 pp" in residual_sentence(small, (0.12, 0.28))


def test_no_residual_while_a_part_is_not_measured_and_the_answer_names_it(tmp_path, capsys):
    """Every fabric-raw-step run failed (or the experiment ran only some ablations): its cost
    is in the total but in no part, so the total minus the parts would hold it and blame
    'interactions'. The residual is not computed, it joins no Holm family, and the answer line
    names the part; a part one rank cannot isolate costs nothing there and leaves it be."""
    from compare.api import ReportOptions, analyse_paths
    from compare.cli import main
    from compare.decomposition import residual_test

    arms = [a for a in ONE_GPU if a != "fabric-raw-step"]
    layout = layout_of(arms, "native", 1)
    assert layout is not None
    assert [i.title for i in layout.unmeasured] == ["backward and step wrappers"]
    points = experiment(np.random.default_rng(7), arms)
    assert residual_test(layout, points, None) is None
    found = decompose(layout, points, {}, None)
    rows = {r.responsibility: r for r in found.rows}
    rest = rows["residual"]
    assert rest.percent is None and rest.ci_low is None
    assert rest.why == "not computed: backward and step wrappers not measured"
    assert found.residual_sentence.startswith(
        "no residual: the total minus the parts would hold what no run measured here, backward"
        " and step wrappers (not measured here: no fabric-raw-step runs);"
    )
    assert rows["total"].percent is not None  # the total and the measured parts stay
    assert rows["mixed precision"].percent == pytest.approx(4.0, abs=0.6)
    # in the report: the answer line names the part, and no line blames interactions
    folder = _folder(tmp_path, arms, np.random.default_rng(8))
    report = analyse_paths([folder], ReportOptions())
    [d] = report.decomposition
    assert d.family == 7 and all(o.family == 7 for o in report.overhead)  # 7 comparisons
    assert main([str(folder), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "where the cost comes from, 1 GPU: no residual: the total minus the parts" in text
    assert "a residual of" not in text and "the parts explain the total: residual" not in text
    # one GPU: the launch ablation isolates nothing there, so the residual is computed
    assert layout_of(ONE_GPU, "native", 1).unmeasured == ()  # type: ignore[union-attr]
