"""Each output format parses; --output and --plot write files and never clobber by accident."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from compare.cli import build_parser, main
from compare_factory import make_result, write


@pytest.fixture
def pair(tmp_path: Path) -> list[str]:
    """A native and a lightning run at 2 GPUs."""
    return [
        str(write(tmp_path / "n.json", make_result("native", world_size=2, seed=1))),
        str(
            write(
                tmp_path / "l.json", make_result("lightning", world_size=2, seed=2, median_ms=104.0)
            )
        ),
    ]


def output_of(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """stdout of a successful compare run."""
    assert main([*argv]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_text_shows_configuration_before_any_number_and_says_which_way_is_better(
    pair: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    text = output_of(capsys, *pair)
    assert (
        text.index("Configuration and environment")
        < text.index("Speed")
        < text.index("Overhead: arm vs")
    )
    assert "img/s ↑" in text and "median ms ↓" in text and "↑ higher is better" in text
    # the sentence says why there is no verdict (intervals.interval_line)
    assert "2 GPU(s): lightning vs native: point estimate +" in text
    assert "no verdict: the interval needs at least 2 runs a side" in text
    assert text.index("Overhead: arm vs") < text.index(
        "Steady state: first vs second half of timed steps"
    )


def test_json_parses_with_runs_pairs_overhead_scaling_and_warnings(
    pair: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    report = json.loads(output_of(capsys, *pair, "--format", "json"))
    assert {"runs", "pairs", "overhead", "host", "scaling", "warnings"} <= report.keys()
    # runs_needed and min_percent gave way to the reason, blocks, df, fastest-run %
    assert {
        "world_size",
        "arm",
        "baseline",
        "percent",
        "ci_low",
        "ci_high",
        "half_width",
        "verdict",
        "verdict_possible",
        "significant",
        "estimator",
        "method",
        "arm_runs",
        "baseline_runs",
        "no_verdict_reason",
        "min_detectable_percent",
        "arm_median_ms",
        "baseline_median_ms",
        "fastest_run_percent",
        "blocks",
        "df",
    } <= report["overhead"][0].keys()
    assert [s["file"] for s in report["steady_state"]] == ["n.json", "l.json"]
    assert {"first_half_median_ms", "second_half_median_ms", "change_percent"} <= report[
        "steady_state"
    ][0].keys()


def test_csv_parses_to_one_row_per_run(pair: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    frame = pd.read_csv(io.StringIO(output_of(capsys, *pair, "--format", "csv")))
    assert sorted(frame["implementation"]) == ["lightning", "native"]
    assert {
        "images_per_second_median",
        "step_p95_ms",
        "peak_reserved_gib",
        "overhead_ci_low",
    } <= set(frame.columns)
    assert {"first_half_median_ms", "second_half_median_ms", "steady_state_change_percent"} <= set(
        frame.columns
    )


def test_markdown_tables_have_a_header_separator_row(
    pair: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    lines = output_of(capsys, *pair, "--format", "markdown").splitlines()
    header = lines.index(
        "| arm | GPUs | runs | img/s ↑ | img/s/GPU ↑ | median ms ↓ | p5 ms ↓ |"
        " p95 ms ↓ | wall-clock img/s ↑ |"
    )
    assert lines[header + 1] == "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    steady = lines.index("## Steady state: first vs second half of timed steps")
    assert lines[steady + 2] == "| run file | first-half median ms | second-half median ms | Δ % |"


def test_output_writes_the_report_to_a_file(
    pair: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "report.json"
    assert output_of(capsys, *pair, "--format", "json", "--output", str(target)) == ""
    assert json.loads(target.read_text())["pairs"][0]["world_size"] == 2


def test_output_never_replaces_an_existing_file_without_overwrite_output(
    pair: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "report.txt"
    target.write_text("keep me")
    assert main([*pair, "--output", str(target)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"compare: error: --output {target} already exists;"
        " choose another path or add --overwrite-output\n"
    )
    assert target.read_text() == "keep me"
    output_of(capsys, *pair, "--output", str(target), "--overwrite-output")
    assert target.read_text().startswith("resnet50 on NVIDIA H200")


def test_plot_writes_a_png_of_more_than_10_kb(
    pair: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    more = [
        str(write(tmp_path / f"{impl}4.json", make_result(impl, world_size=4, seed=5)))
        for impl in ("native", "lightning")
    ]
    png = tmp_path / "comparison.png"
    output_of(capsys, *pair, *more, "--plot", str(png))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000


def test_plot_name_must_have_an_image_suffix(
    pair: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*pair, "--plot", str(tmp_path / "plot.txt")]) == 2
    assert "must end in .png, .svg, .pdf" in capsys.readouterr().err


def test_help_describes_every_option() -> None:
    parser = build_parser()
    for action in parser._actions:
        assert action.help, f"{action.dest} has no help"
    text = parser.format_help()
    for option in (
        "--format",
        "--output",
        "--overwrite-output",
        "--plot",
        "--allow-mismatch",
        "--baseline",
        "--verbose",
    ):
        assert option in text


def test_text_groups_a_warning_of_many_runs_into_one_line_per_arm_with_ranges() -> None:
    from compare.flags import Flag
    from compare.report import grouped_warnings

    host = "host-bound (GPU busy {share:.1%} of the timed step): the GPU waits"
    steady = "not in steady state: {change:+.1f}% (limit ±2%)"
    synced = "parameters are NOT synchronised (max checksum difference {difference:g})"
    warnings = [
        Flag("host-bound", host, {"share": 0.891}, file="b-r2.json", arm="b"),
        Flag("host-bound", host, {"share": 0.82}, file="a-r10.json", arm="a"),
        Flag("host-bound", host, {"share": 0.855}, file="a-r2.json", arm="a"),
        Flag("not-steady", steady, {"change": -4.3}, file="a-r1.json", arm="a"),
        Flag.plain("environment", "environment differs: driver"),
        Flag.plain("environment", "environment differs: driver"),
        Flag("unsynchronised", synced, {"difference": 1e-05}, file="a-r1.json", arm="a"),
        Flag("unsynchronised", synced, {"difference": 3.5e-07}, file="a-r2.json", arm="a"),
    ]
    assert grouped_warnings(warnings) == [
        "b-r2.json: host-bound (GPU busy 89.1% of the timed step): the GPU waits",
        "host-bound (GPU busy 82.0..85.5% of the timed step): the GPU waits"
        " [2 runs: a-r2.json, a-r10.json]",
        "a-r1.json: not in steady state: -4.3% (limit ±2%)",
        "environment differs: driver",
        "environment differs: driver",
        "parameters are NOT synchronised (max checksum difference 3.5e-07..1e-05)"
        " [2 runs: a-r1.json, a-r2.json]",
    ]


def test_the_configuration_names_many_files_by_the_first_and_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [
        write(tmp_path / f"native-r{k}.json", make_result("native", seed=k)) for k in range(1, 6)
    ]
    files.append(write(tmp_path / "lightning-r1.json", make_result("lightning")))
    assert main([*map(str, files), "--format", "text"]) == 0
    row = next(
        line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("file")
    )
    assert "native-r1.json .. native-r5.json (5 files)" in row and "lightning-r1.json" in row


def test_cpu_runs_count_ranks_not_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cpu = {"accelerator": "cpu"}
    files = [
        write(tmp_path / f"{impl}-r{k}.json", make_result(impl, world_size=2, seed=k, config=cpu))
        for impl in ("native", "lightning")
        for k in (1, 2)
    ]
    assert main([*map(str, files), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "2 CPU rank(s): " in text and "images/rank" in text and "CPU ranks" in text
    assert "GPU(s)" not in text and "img/s/GPU" not in text
    assert main([*map(str, files), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["unit"] == "CPU rank(s)"
