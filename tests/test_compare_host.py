"""compare's host cost per step: each arm's host CPU ms per timed step, the median over runs
with its distribution-free interval (intervals.median_interval: robust to spikes, its coverage
under spikes is simulated in tests/test_stats_levels.py), the arms' difference by the same
method as the step time, and whether extra host work reaches the step time (the GPU's busy
share). Results without the field show '-'."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from compare.analysis import analyse
from compare.api import load
from compare.cli import main
from compare.outputs import render
from compare_factory import as_version_1, make_result, write
from stats import comparison, distributions, intervals


def _runs(tmp_path: Path, host: dict[str, list[float]] | None) -> list:
    """Three runs a side (native 100 ms, fabric 101 ms), with host ms per step when given."""
    paths = [
        write(
            tmp_path / f"{impl}-r{k}.json",
            make_result(
                impl,
                median_ms=(100.0 if impl == "native" else 101.0) + 0.1 * k,
                seed=k + (10 if impl == "fabric" else 0),
            ),
        )
        for impl in ("native", "fabric")
        for k in range(3)
    ]
    runs, _ = load(paths)
    if host is None:
        return runs
    return [dataclasses.replace(r, host_ms_per_step=host[r.label][int(r.file[-6])]) for r in runs]


def test_each_arms_host_ms_and_the_difference_in_ms(tmp_path: Path) -> None:
    host = {"native": [5.0, 5.1, 4.9], "fabric": [6.0, 6.2, 5.9]}
    report = analyse(_runs(tmp_path, host))
    rows = {h.arm: h for h in report.host}
    assert rows["native"].host_ms == pytest.approx(5.0) and rows["native"].runs == 3
    fabric = rows["fabric"]
    assert fabric.host_ms == pytest.approx(6.0)  # the median, not the mean (6.033)
    # 3 runs: no 95% order-statistic interval exists, so it is the range, labelled as such
    assert (fabric.host_low_ms, fabric.host_high_ms) == pytest.approx((5.9, 6.2))
    assert fabric.host_coverage == pytest.approx(0.75)
    assert "range of 3 run(s)" in (fabric.host_interval or "")
    [o] = report.overhead
    base = distributions.geometric_mean(host["native"])
    ratio = comparison.compare_arms(
        [
            intervals.RunPoint(arm, ms, name=f"{arm}{k}")
            for arm in host
            for k, ms in enumerate(host[arm])
        ],
        "fabric",
        "native",
    )
    assert o.host_diff_ms == pytest.approx(base * ratio.percent / 100)
    assert o.host_ci_low_ms == pytest.approx(base * ratio.ci_low / 100)
    assert o.host_ci_low_ms > 0 and "fabric spends" in (o.host_verdict or "")
    assert "more host CPU per step than native" in (o.host_verdict or "")
    text = render(report, "text")
    assert "Host cost per step" in text and "host ms/step" in text
    section = text.split("Host cost per step")[1]
    assert "5.900..6.200" in section and "75.0" in section
    assert "order-statistic interval of that median" in section  # the legend says what it is


def test_a_spike_moves_the_host_median_not_its_level(tmp_path: Path) -> None:
    """One run of three 30% slower (a neighbour's job): the mean would move by 10%, the
    median stays on a normal run."""
    host = {"native": [5.0, 5.1, 4.9], "fabric": [6.0, 7.8, 5.9]}
    fabric = {h.arm: h for h in analyse(_runs(tmp_path, host)).host}["fabric"]
    assert fabric.host_ms == pytest.approx(6.0)
    assert (fabric.host_low_ms, fabric.host_high_ms) == pytest.approx((5.9, 7.8))


def test_results_without_host_time_show_a_dash(tmp_path: Path) -> None:
    report = analyse(_runs(tmp_path, None))
    assert all(h.host_ms is None and h.runs == 0 for h in report.host)
    [o] = report.overhead
    assert o.host_diff_ms is None and o.host_verdict is None
    section = render(report, "text").split("Host cost per step")[1].split("\n\n")[0]
    assert " - " in section


@pytest.mark.parametrize(
    ("busy", "words"),
    [(None, "not recorded"), (0.5, "host-bound: the GPU idles 50%"), (0.97, "GPU-bound")],
)
def test_the_slack_says_whether_host_work_reaches_the_step(tmp_path: Path, busy, words) -> None:
    runs = [dataclasses.replace(r, gpu_share=busy) for r in _runs(tmp_path, None)]
    [row, *_] = analyse(runs).host
    assert words in row.slack
    if busy is not None:
        assert row.gpu_idle_ms == pytest.approx(row.step_ms * (1 - busy))


def test_host_time_is_read_from_result_files(tmp_path: Path, capsys) -> None:
    """The result's summary (mean over ranks), else the ranks' own values averaged."""

    def with_host(impl: str, k: int, summary: float | None, ranks: list[float]) -> str:
        r = make_result(
            impl,
            world_size=2,
            seed=k + (10 if impl == "fabric" else 0),
            median_ms=100.0 if impl == "native" else 101.0,
        )
        r = r.model_copy(
            update={
                "host_ms_per_step": summary,
                "ranks": [
                    rank.model_copy(update={"host_ms_per_step": ms})
                    for rank, ms in zip(r.ranks, ranks)
                ],
            }
        )
        path = tmp_path / f"{impl}-r{k}.json"
        if summary is None:  # older results (version 1) record the ranks' values only
            path.write_text(json.dumps(as_version_1(r)))
            return str(path)
        return str(write(path, r))

    files = [
        with_host("native", k, 5.0 + 0.1 * k, [4.9 + 0.1 * k, 5.1 + 0.1 * k]) for k in range(3)
    ]
    files += [with_host("fabric", k, None, [6.0 + 0.1 * k, 6.2 + 0.1 * k]) for k in range(3)]
    assert main([*files, "--format", "json"]) == 0
    host = {row["arm"]: row for row in json.loads(capsys.readouterr().out)["host"]}
    assert host["native"]["host_ms"] == pytest.approx(5.1)
    assert host["fabric"]["host_ms"] == pytest.approx(6.2) and host["fabric"]["runs"] == 3
