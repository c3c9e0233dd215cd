"""Outputs people look at: the DataFrame API, the HTML page (in a real headless Chromium), the
drift plot, and the README's notebook example.

The experiment folder used is a committed one with warm-up runs and three blocks
(results/h200/arms/original-defaults-long-first-on-machine), so the page has every part.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import ROOT, clean_env
from matplotlib.figure import Figure

from browser import browser  # noqa: F401  (the fixture)
from compare.api import analyse_runs, load, overhead_frame, runs_frame
from compare.figures import (
    ENERGY,
    STEP,
    draw_drift,
    drift_panel,
    drift_points,
    drift_values,
    overhead_panel,
)
from compare.model import RUN_COLUMNS
from compare.outputs import render, render_html
from compare.verdicts import NO_OVERHEAD
from compare_factory import make_result, write

FOLDER = ROOT / "results" / "h200" / "arms" / "original-defaults-long-first-on-machine"
ARMS = ("native", "fabric", "lightning")


def _compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "compare", *args],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_runs_frame_has_one_row_per_run_warmup_marked_and_the_tidy_columns():
    frame = runs_frame(FOLDER)
    manifest_runs = [r for r in load([FOLDER], include_warmup=True)[0]]
    assert list(frame.columns) == list(RUN_COLUMNS)
    assert len(frame) == len(manifest_runs) == 16
    assert frame.warmup.sum() == 4 and frame.counted.sum() == 12
    assert (frame.warmup != frame.counted).all()
    assert set(frame.arm) == {"native", "fabric", "lightning", "lightning-services"}
    assert frame.started_utc.is_monotonic_increasing  # the manifest's order is time order
    assert frame[frame.counted].block.between(1, 3).all()
    assert (frame.run_median_ms > 0).all()


def test_runs_frame_of_files_and_without_warmup_runs(tmp_path):
    a = write(tmp_path / "native.json", make_result("native", median_ms=100.0))
    b = write(tmp_path / "lightning.json", make_result("lightning", median_ms=102.0, seed=1))
    frame = runs_frame(a, b)
    assert list(frame.arm) == ["native", "lightning"]
    assert frame.block.isna().all() and frame.counted.all()
    assert len(runs_frame(FOLDER, include_warmup=False)) == 12


def test_overhead_frame_is_the_reports_overhead():
    runs, baseline = load([FOLDER])
    report = analyse_runs(runs, baseline)
    frame = overhead_frame(FOLDER)
    assert list(frame.arm) == [o.arm for o in report.overhead]
    assert list(frame.percent) == [o.percent for o in report.overhead]
    assert list(frame.verdict) == [o.verdict for o in report.overhead]


def test_csv_rows_start_with_the_dataframes_columns():
    proc = _compare(str(FOLDER), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    header = proc.stdout.splitlines()[0].split(",")
    assert header[: len(RUN_COLUMNS)] == list(RUN_COLUMNS)
    assert len(proc.stdout.splitlines()) == 1 + 12  # counted runs only


def test_the_readme_notebook_example_runs():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(from compare import.*?)```", readme, re.S)
    assert block, "README has no notebook example starting with 'from compare import'"
    code = block.group(1)
    assert len(code.strip().splitlines()) <= 5
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "native" in proc.stdout


def test_drift_points_mark_warmup_runs_and_blocks():
    runs, _ = load([FOLDER], include_warmup=True)
    points = drift_points(runs)
    assert len(points) == 16
    assert sum(p.warmup for p in points) == 4
    assert {p.block for p in points if not p.warmup} == {1, 2, 3}
    assert all(p.finished is None or p.finished >= p.started for p in points)


def test_the_drift_figure_adds_energy_with_the_temperature_where_runs_read_them():
    energy = ROOT / "results" / "h200" / "energy" / "gpu-bound-2026-12-05"
    runs, baseline = load([energy], include_warmup=True)
    points = drift_points(runs)
    assert drift_values(points) == [STEP, ENERGY]
    assert drift_values(drift_points(load([FOLDER], include_warmup=True)[0])) == [STEP]
    report = analyse_runs(runs, baseline)
    ax = Figure().add_subplot()
    drift_panel(ax, report, points, ENERGY)
    native = sorted((r for r in runs if r.label == "native"), key=lambda r: r.started_utc)
    line = next(ln for ln in ax.lines if ln.get_label() == "native")
    assert list(line.get_ydata()) == [r.values.joules_per_unit for r in native]
    assert len(ax.figure.axes) == 1  # these runs read no temperature: no right axis
    # temperatures in reverse run order, and one run without J/image: left out of the panel
    late = sorted(points, key=lambda p: p.started, reverse=True)
    hot = [replace(p, gpu_temperature_c=50.0 + k) for k, p in enumerate(late)]
    hot[0] = replace(hot[0], joules_per_unit=None)
    ax = Figure().add_subplot()
    drift_panel(ax, report, hot, ENERGY)
    plotted = [y for ln in ax.lines if not ln.get_label().startswith("_") for y in ln.get_ydata()]
    assert len(plotted) == len(points) - 1 and None not in plotted
    right = ax.figure.axes[1]
    assert list(right.lines[0].get_ydata()) == [p.gpu_temperature_c for p in reversed(hot)]
    buffer = io.BytesIO()
    draw_drift(report, points, buffer)
    assert buffer.getvalue().startswith(b"\x89PNG")


def test_an_arm_with_only_warmup_runs_gets_a_colour_of_its_own_in_the_drift_figure():
    # a cut-short experiment: fabric and lightning ran only their warm-up runs
    probe = ROOT / "results" / "h100" / "energy" / "temperature-probe-2026-12-06"
    runs, baseline = load([probe], include_warmup=True)
    ax = Figure().add_subplot()
    drift_panel(ax, analyse_runs(runs, baseline), drift_points(runs))
    colours = {ln.get_label(): ln.get_color() for ln in ax.lines if ln.get_label() in ARMS}
    assert set(colours) == set(ARMS) and len(set(colours.values())) == 3, colours
    assert "tab:gray" not in colours.values()
    ax = Figure().add_subplot()
    overhead_panel(ax, analyse_runs(runs, baseline))  # one counted arm: says there is no pair
    assert [t.get_text() for t in ax.texts] == [NO_OVERHEAD.replace(": ", ":\n")]


def test_labels_are_text_never_markup(tmp_path):
    """A '$' (matplotlib's mathtext) or '<script>' (HTML) in a label is shown as written."""
    runs, _ = load([FOLDER], include_warmup=True)
    renamed = [
        type(r)(
            **{
                **r.__dict__,
                "label": {
                    "native": "na$tive<script>",
                }.get(r.label, r.label),
            }
        )
        for r in runs
    ]
    report = analyse_runs(renamed, "na$tive<script>")
    buffer = io.BytesIO()
    draw_drift(report, drift_points(renamed), buffer)  # mathtext would raise on one '$'
    assert buffer.getvalue().startswith(b"\x89PNG")
    page = render_html(report, [("figure", buffer.getvalue())])
    assert "<script>" not in page and "na$tive&lt;script&gt;" in page


def test_the_page_is_self_contained():
    runs, baseline = load([FOLDER], include_warmup=True)
    page = render(analyse_runs(runs, baseline), "html", drift_points(runs))
    assert page.count('<img src="data:image/png;base64,') == 2
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    assert "@media print" in page


def test_compare_html_and_drift_options_write_their_files(tmp_path):
    page, drift = tmp_path / "report.html", tmp_path / "drift.png"
    proc = _compare(str(FOLDER), "--format", "html", "--output", str(page), "--drift", str(drift))
    assert proc.returncode == 0, proc.stderr
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert drift.read_bytes().startswith(b"\x89PNG")


def test_drift_of_results_without_start_times_is_refused_before_any_write(tmp_path):
    original = ROOT / "tests" / "data" / "original" / "native-h200-b256.json"
    plot = tmp_path / "plot.png"
    proc = _compare(str(original), "--plot", str(plot), "--drift", str(tmp_path / "d.png"))
    assert proc.returncode == 2 and "--drift" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not plot.exists()


@pytest.mark.browser
def test_the_html_report_renders_in_a_real_browser(browser, tmp_path):  # noqa: F811
    page = tmp_path / "report.html"
    proc = _compare(str(FOLDER), "--format", "html", "--output", str(page))
    assert proc.returncode == 0, proc.stderr
    browser.open(page)
    verdicts = [v.text for v in browser.find_all(".verdict")]
    assert len(verdicts) == 5
    assert all(" vs " in v or "between" in v or "than" in v for v in verdicts)
    images = browser.find_all("figure img")
    assert len(images) == 2
    for image in images:  # decoded and laid out: a broken data URI has no natural width
        assert browser.driver.execute_script("return arguments[0].naturalWidth", image) > 600
    assert browser.find_all("table")
    assert browser.console_errors() == []
    browser.screenshot("compare-report", full_page=True)


def test_the_report_shows_where_each_arms_wall_time_went():
    """per arm, the run's seconds (its phases added up), the imports among them and
    the share that was timed, as medians over the arm's runs (results/h200, phase_seconds)."""
    import json
    import statistics

    folder = ROOT / "results" / "h200" / "overhead" / "gpu-bound-2.5-minutes"
    runs, baseline = load([folder])
    rows = {row.arm: row for row in analyse_runs(runs, baseline).table}
    for arm in ("native", "lightning"):
        phases = [json.loads(r.path.read_text())["phase_seconds"] for r in runs if r.label == arm]
        totals = [sum(v for v in p.values() if v is not None) for p in phases]
        assert rows[arm].run_seconds == statistics.median(totals)
        assert rows[arm].imports_seconds == statistics.median(p["imports"] for p in phases)
        shares = [p["timed"] / t for p, t in zip(phases, totals)]
        assert rows[arm].timed_share == statistics.median(shares)
        assert 0 < rows[arm].timed_share < 0.5  # imports and warm-up dominate these runs
    proc = _compare(str(folder))
    assert "timed % of run" in proc.stdout and "imports s" in proc.stdout


def test_write_reports_fills_a_new_folder_once_and_never_writes_over_it(tmp_path):
    """compare.api.write_reports, as the experiment calls it: report.txt, .md, .html and both
    figures, the texts those compare renders; a second call refuses at the first file, naming
    it, and leaves every file as it was."""
    from common.output import OutputError
    from compare.api import ReportFiles, drift_points, render, write_reports

    runs, baseline = load([FOLDER], include_warmup=True)
    report, points = analyse_runs(runs, baseline), drift_points(runs)
    write_reports(report, ReportFiles.folder(tmp_path), points)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert sorted(files) == [
        "comparison.png",
        "drift.png",
        "report.html",
        "report.md",
        "report.txt",
    ]
    assert files["report.txt"].decode() == render(report, "text")
    assert files["report.md"].decode() == render(report, "markdown")
    assert all(files[name].startswith(b"\x89PNG") for name in ("comparison.png", "drift.png"))
    with pytest.raises(OutputError, match=r"report.txt .*already exists"):
        write_reports(report, ReportFiles.folder(tmp_path), points)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files


def test_write_reports_of_an_interleaved_answer_writes_texts_and_refuses_figures(tmp_path):
    from compare.api import ReportFiles, analyse_interleaved, render, write_reports
    from compare.model import CompareError

    answer = analyse_interleaved([ROOT / "tests" / "data" / "interleaved.json"])
    with pytest.raises(CompareError, match="comparison.png: an interleaved answer has no figures"):
        write_reports(answer, ReportFiles.folder(tmp_path))
    assert list(tmp_path.iterdir()) == []
    texts = ReportFiles.folder(tmp_path, ("text", "markdown"), plot=False, drift=False)
    write_reports(answer, texts)
    assert (tmp_path / "report.md").read_text() == render(answer, "markdown")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "report.txt"]
