"""Each output format parses; --output and --plot write files and never clobber by accident."""

from __future__ import annotations

import io
import json
import re
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
    words = " ".join(text.split())  # the prose is wrapped at 100 columns
    assert (
        text.index("Configuration and environment")
        < text.index("Speed")
        < text.index("Overhead: arm vs")
    )
    assert "img/s ↑" in text and "median ms ↓" in text and "↑ higher is better" in text
    # the sentence says why there is no verdict (verdicts.interval_line)
    assert "2 GPU(s): lightning vs native: point estimate +" in words
    assert "no verdict: the interval needs at least 2 runs a side" in words
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
        "units_per_second_median",
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
        " p95 ms ↓ | wall-clock img/s ↑ | J/image ↓ |"
    )
    assert lines[header + 1] == (
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
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


def test_the_parser_is_built_from_compare_options_fields() -> None:
    """compare's options are CompareOptions' fields, as the runners' are BenchConfig's: each
    field one option with its help and default, in field order on the usage line, in the
    help's one list of options; parsing gives the typed value and the ReportOptions it asks for."""
    from common.option_fields import flag, option_fields
    from compare.api import ReportOptions
    from compare.cli import CompareOptions, parse

    parser = build_parser()
    actions = {action.dest: action for action in parser._actions}
    fields = option_fields(CompareOptions)
    assert {f.name for f, _ in fields} | {"files", "help"} == set(actions)
    for field, spec in fields:
        action = actions[field.name]
        assert action.option_strings == [flag(field.name)] and action.default == field.default
        assert action.help.startswith(spec.help)
    usage = parser.format_usage()
    positions = [usage.index(f"[{flag(f.name)}") for f, _ in fields]
    assert positions == sorted(positions)
    text = parser.format_help()
    assert "\noptions:\n  -h, --help" in text and "\ncomparison:" not in text
    listed = [text.index(f"  {flag(f.name)}") for f, _ in fields]
    assert listed == sorted(listed)
    opts = parse(["a.json", "dir", "--baseline", "fabric", "--allow-mismatch", "--format", "json"])
    assert opts.files == (Path("a.json"), Path("dir")) and opts.format == "json"
    assert opts.report == ReportOptions("fabric", True) and opts.output is None


def test_text_groups_a_warning_of_many_runs_into_one_line_per_arm_with_ranges() -> None:
    from compare.flags import Flag, grouped_warnings

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
    # a table too wide for 100 columns is split by arm: the file row of every part
    row = " ".join(
        line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("file")
    )
    assert "native-r1.json .. native-r5.json (5 files)" in row and "lightning-r1.json" in row


def test_gpu_busy_is_read_from_the_runs_that_profiled(tmp_path: Path) -> None:
    # experiment --profile-runs first: only each arm's first counted run has a GPU busy share
    from compare.api import load
    from compare.header import header_rows

    busy = {"native": (0.95, None, None), "lightning": (0.93, 0.91, None)}
    paths = [
        write(tmp_path / f"{arm}-r{k}.json", make_result(arm, seed=k, gpu_busy=share))
        for arm, shares in busy.items()
        for k, share in enumerate(shares, 1)
    ]
    runs = load(paths)[0]
    row = next(
        r for r in header_rows(runs, ["native", "lightning"]) if r.field == "GPU busy (timed step)"
    )
    assert row.values == {
        "native": "95% (profiled runs)",
        "lightning": "91%..93% (profiled runs)",
    }
    everywhere = [write(tmp_path / f"all-{k}.json", make_result(gpu_busy=0.9)) for k in (1, 2)]
    rows = header_rows(load(everywhere)[0], ["native"])
    row = next(r for r in rows if r.field == "GPU busy (timed step)")
    assert row.values == {"native": "90%"}


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


def test_text_and_markdown_open_with_the_answer_and_fit_100_columns(
    pair: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Title, then one line per comparison (verdict, runs, interval), then the tables."""
    lines = output_of(capsys, *pair).splitlines()
    assert lines[0].startswith("resnet50 on NVIDIA H200") and lines[1] == ""
    verdict = r"lightning vs native, 2 GPUs: \+\d+\.\d\d% \(1 run a side\), no verdict: "
    assert re.match(verdict, lines[2])
    assert lines.index(next(x for x in lines if x.startswith("Configuration"))) > 2
    assert max(len(line) for line in lines) <= 100
    md = output_of(capsys, *pair, "--format", "markdown").splitlines()
    assert md[0].startswith("# resnet50 on NVIDIA H200") and md[1] == ""
    assert re.match("- " + verdict, md[2])
    assert max(len(line) for line in md if not line.startswith("|")) <= 100  # tables stay whole


def test_configuration_rows_the_same_in_every_arm_fold_unless_verbose(
    pair: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    short = output_of(capsys, *pair)
    config = short.split("Configuration and environment")[1].split("\n\n")[0]
    assert not re.search(r"^\s+arch\s", config, flags=re.M)
    folded = re.search(r"(\d+) more fields are the same in every arm \(--verbose", config)
    assert folded and int(folded.group(1)) > 10
    # the legends come after every table: the last section
    assert short.index("Slow ranks") < short.index("\nLegend\n") < short.index("estimator:")
    full = output_of(capsys, *pair, "--verbose")
    config = full.split("Configuration and environment")[1].split("\n\n")[0]
    assert re.search(r"^\s+arch\s+resnet50\s+resnet50$", config, flags=re.M)
    assert "more fields are the same" not in full and "\nLegend\n" not in full
    assert full.index("estimator:") < full.index("Host cost per step")  # under its table
    assert max(len(line) for line in full.splitlines()) <= 100


def test_numbers_are_right_aligned_by_column_in_every_format(
    pair: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """One rule: a numeric column is right-aligned in text, markdown and HTML, '-' and
    intervals ("1.48..2.14") included."""
    from compare.analysis import analyse
    from compare.api import load
    from compare.outputs import render_html

    text = output_of(capsys, *pair)
    host = text.split("Host cost per step")[1].split("\n\n")[0].splitlines()
    header, rule, *rows = host[1 : 3 + len(pair)]
    assert "interval ms" in header and rows
    spans = [m.span() for m in re.finditer(r"-+", rule)]  # each column's extent
    for row in rows:  # numbers flush right, "-" cells included; the arm's name flush left
        assert all(row[end - 1] != " " for i, (_, end) in enumerate(spans) if i != 1), row
        assert row[spans[1][0]] != " " and row[spans[1][0] - 1] == " ", row
    assert {row[spans[1][0] :].split()[0] for row in rows} == {"native", "lightning"}
    runs, _ = load(pair)
    page = render_html(analyse(runs))
    assert '<th class="num">95% CI %</th>' in page
    assert re.search(r'<td class="num">-</td>', page)  # a missing number sits with the numbers
    ci = re.search(r"<td[^>]*>[-+]?\d+\.\d+\.\.[-+]?\d+\.\d+</td>", page)
    assert ci is None or 'class="num"' in ci.group(0)


def test_the_arm_table_is_typed_rows_whose_fields_name_the_columns(
    pair: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """ArmRow's fields are the json table's keys and carry each column's header and format."""
    from dataclasses import fields

    from compare.rows import ArmRow

    report = json.loads(output_of(capsys, *pair, "--format", "json"))
    assert [list(row) for row in report["table"]] == [[f.name for f in fields(ArmRow)]] * 2
    words = {"rate": "img/s", "energy": "J/image", "world": "GPUs", "per": "GPU"}
    speed = ArmRow.columns("speed", words)
    assert [h for _, h, _ in speed][3:5] == ["img/s ↑", "img/s/GPU ↑"]
    text = output_of(capsys, *pair)
    assert "  ".join(["median ms ↓", "p5 ms ↓", "p95 ms ↓"]) in text


def test_the_run_rows_are_typed_rows_whose_fields_are_the_csv_header(
    pair: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """RunRow's field names are the csv header and the json runs' keys, in order; the values
    are the run's (its wall-clock units/s, not the median step's)."""
    from dataclasses import fields

    from compare.rows import RunRow

    names = [f.name for f in fields(RunRow)]
    csv = pd.read_csv(io.StringIO(output_of(capsys, *pair, "--format", "csv")))
    assert list(csv.columns) == names and len(csv) == 2
    report = json.loads(output_of(capsys, *pair, "--format", "json"))
    assert [list(row) for row in report["runs"]] == [names] * 2
    for row in report["runs"]:
        result = json.loads(Path(row["file"]).read_text())
        assert row["units_per_second"] == pytest.approx(result["units_per_second"])
        assert row["runs"] == 1 and row["counted"] and not row["warmup"]
    # the notebook's runs frame shares the csv's columns and their meaning
    from compare import runs_frame

    frame = runs_frame(*pair)
    assert sorted(frame.units_per_second) == pytest.approx(sorted(csv.units_per_second))


def test_a_long_span_of_files_names_the_last_by_what_differs() -> None:
    """So that a configuration column stays narrow; a folder that differs is kept whole."""
    from compare.render import span

    long = [f"lightning-2.6.2+git35e56ef-r{k}.json" for k in (1, 2, 3)]
    assert span(long) == "lightning-2.6.2+git35e56ef-r1.json .. r3.json (3 files)"
    assert span(["n-r1.json", "n-r2.json", "n-r3.json"]) == "n-r1.json .. n-r3.json (3 files)"
    assert span(["n-r1.json", "n-r2.json"]) == "n-r1.json, n-r2.json"
    folders = [f"devices-{k}/lightning-2.6.2+git35e56ef-r1.json" for k in (1, 2, 3)]
    assert span(folders) == f"{folders[0]} .. {folders[-1]} (3 files)"
