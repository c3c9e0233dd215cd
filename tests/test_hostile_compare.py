"""Issue 44's compare-side causes: every number read from a file checked at the boundary, every
text a report prints from a file or label made safe for its format.

The inputs are a committed H200 experiment (energy, temperatures, a manifest with warm-up runs)
and the committed interleaved result, copied and edited as a hostile user would. The promise for
each: exit 0 with a report, or exit 2 with one line naming the file and field; never a crash,
never a verdict from inconsistent data, no raw control character or unescaped markup in the
output, and the inputs left as they were.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compare.cli import main

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "results" / "h200" / "telemetry" / "original-workload"  # 3 blocks, native vs fabric
INTERLEAVED = ROOT / "tests" / "data" / "interleaved.json"
FORMATS = ("text", "markdown", "csv", "json")
FORGED = "FORGED: fabric vs native: 50% faster"
# Names a hostile user gives files and labels: line breaks, terminal escapes, bidi overrides,
# HTML, links, emphasis, list and heading starts, spreadsheet formulas
NASTY = (
    f"\n{FORGED}\n", "\r", "\x1b[31m", "\u202e", "\x85", "\u2028", "\t",
    "<img src=x onerror=alert(1)>", "[x](javascript:alert(1))", "![t](http://e/t.png)",
    '=HYPERLINK("http://e","x")', "=1+2", "+1", "-1", "@SUM(A1)", "`code`", "*em*", "_u_",
    "# h", "- item", "1. item", "> quote", "|", "&lt;b&gt;", "$x$", "\\", "~~s~~",
)  # fmt: skip


def experiment(tmp_path: Path) -> Path:
    """A copy of the committed GPU experiment, without its reports and logs."""
    out = tmp_path / "exp"
    shutil.copytree(GPU, out, ignore=shutil.ignore_patterns("*.png", "report.*", "logs"))
    return out


def edit(path: Path, change: Callable[[dict], Any]) -> None:
    """Rewrite a JSON file with `change` applied to its document."""
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def compare(*argv: str) -> tuple[int, str, str]:
    """python -m compare in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def refused(argv: list[str], *names: str) -> str:
    """Exit 2 with one line, no traceback, naming each of `names`; the line."""
    code, out, err = compare(*argv)
    assert code == 2 and out == "", (code, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert all(name in err for name in names), err
    return err


def assert_safe(fmt: str, out: str) -> None:
    """No raw control character, no forged line, no markup a viewer would run, in `fmt`."""
    lines = out.split("\n")
    assert all(line.isprintable() for line in lines), [x for x in lines if not x.isprintable()]
    assert not any(re.match(rf"(- |\| )?{re.escape(FORGED)}", line) for line in lines)
    if fmt == "markdown":  # every HTML, link and code character is backslash-escaped
        assert re.search(r"(?<!\\)(\\\\)*[<>\[\]`&]", out) is None, out
    elif fmt == "csv":
        for row in csv.reader(io.StringIO(out)):
            for cell in row:
                if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                    float(cell)  # only a number may start so; text starts with a quote
    elif fmt == "json":
        json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    elif fmt == "html":
        assert "onerror" not in re.sub(r"&[a-z]+;", "", " ".join(re.findall(r"<[^>]*>", out)))
        images = re.findall(r"<img[^>]*>", out)
        assert all(tag.startswith('<img src="data:image/png;base64,') for tag in images)


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder`: what compare must leave as it was."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*.json")}


def report_or_one_line(argv: list[str], fmt: str) -> int:
    """The promise: a safe report (exit 0) or one line (exit 2), never a crash."""
    code, out, err = compare(*argv, "--format", fmt)
    assert code in (0, 2), err
    if code == 2:
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    else:
        assert_safe(fmt, out)
    return code


# --- cause 3: a counter that did not tick; absurd energies ---


def _zero_energy(doc: dict) -> None:
    """Every rank's counter read 0 J, and the summary adds them up (consistent)."""
    for rank in doc["ranks"]:
        rank["telemetry"].update(energy_joules=0.0, joules_per_step=0.0, joules_per_image=0.0)
    doc["energy"].update(joules_per_step=0.0, joules_per_image=0.0, watts=0.0)


def test_a_counter_that_did_not_tick_leaves_the_run_without_energy_and_says_so(tmp_path):
    exp = experiment(tmp_path)
    edit(exp / "results" / "native-r2.json", _zero_energy)
    code, out, err = compare(str(exp), "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    native = next(row for row in report["energy"] if row["arm"] == "native")
    assert (native["runs"], native["runs_without"]) == (2, 1)
    assert native["joules_per_unit"] > 0  # the other runs' level, never a 0 among them
    assert any("native-r2.json: the GPU energy counter of rank 0 did not tick" in w
               for w in report["warnings"])  # fmt: skip
    code, out, _ = compare(str(exp))
    assert code == 0 and "did not tick in the timed window (0 J)" in out


@pytest.mark.parametrize("value", [0.0, 1e-300, 1e300])
def test_an_energy_per_image_its_counters_do_not_give_is_refused(tmp_path, value):
    exp = experiment(tmp_path)
    edit(exp / "results" / "native-r2.json", lambda d: d["energy"].update(joules_per_image=value))
    for fmt in ("text", "html"):
        refused([str(exp), "--format", fmt], "native-r2.json", "field energy.joules_per_sample")


# --- cause 4: summaries checked against what they add up ---


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["energy"].update({k: d["energy"][k] * 1000 for k in
                                       ("joules_per_step", "joules_per_image", "watts")}),
         "energy.joules_per_step"),
        (lambda d: d["energy"].update(watts=d["energy"]["watts"] * 2), "energy.watts"),
        (lambda d: d["ranks"][0]["telemetry"].update(joules_per_image=1.0),
         "ranks.0.telemetry.joules_per_sample"),
        (lambda d: d.update(host_ms_per_step=d["host_ms_per_step"] * 2), "host_ms_per_step"),
        (lambda d: d.update(images_per_second=d["images_per_second"] * 2), "samples_per_second"),
        (lambda d: d["ranks"][0]["telemetry"].update(energy_joules=None), "field energy"),
    ],
)  # fmt: skip
def test_a_summary_that_disagrees_with_the_ranks_is_refused(tmp_path, change, field):
    exp = experiment(tmp_path)
    edit(exp / "results" / "fabric-r1.json", change)
    refused([str(exp)], "fabric-r1.json", field)


def test_energy_no_gpu_could_draw_is_refused_though_consistent(tmp_path):
    def thousandfold(doc: dict) -> None:
        t = doc["ranks"][0]["telemetry"]
        for key in ("energy_joules", "joules_per_step", "joules_per_image"):
            t[key] *= 1000
        for key in ("joules_per_step", "joules_per_image", "watts"):
            doc["energy"][key] *= 1000

    exp = experiment(tmp_path)
    edit(exp / "results" / "fabric-r1.json", thousandfold)
    refused([str(exp)], "fabric-r1.json", "ranks.0.telemetry.energy_joules", "more than")


@pytest.mark.parametrize("joules", [5e-324, 1e-12])
def test_a_counter_reading_below_a_nanojoule_is_refused_though_consistent(tmp_path, joules):
    """Consistent, yet J/image so small that its log ratio to a real run would overflow."""

    def tiny(doc: dict) -> None:
        steps, t = doc["measured_steps"], doc["ranks"][0]["telemetry"]
        per_step = joules / steps
        t.update(energy_joules=joules, joules_per_step=per_step,
                 joules_per_image=per_step / doc["batch_size_per_device"])  # fmt: skip
        doc["energy"].update(joules_per_step=per_step, watts=joules / t["window_seconds"],
                             joules_per_image=per_step / doc["global_batch_size"])  # fmt: skip

    exp = experiment(tmp_path)
    edit(exp / "results" / "native-r2.json", tiny)
    refused([str(exp), "--format", "json"], "native-r2.json", "ranks.0.telemetry.energy_joules")


# --- cause 5: telemetry and times bounded before any figure or arithmetic ---


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda t: t.update(gpu_temperature_c_end=1e308), "gpu_temperature_c_end"),
        (lambda t: t.update(gpu_temperature_c_start=-1e308), "gpu_temperature_c_start"),
        (lambda t: t.update(sm_clock_mhz_median=1e308), "sm_clock_mhz_median"),
        (lambda t: t.update(power_watts_median=1e300), "power_watts_median"),
        (lambda t: t["throttle_seconds"].update(power=-1.0), "throttle_seconds.power"),
        (lambda t: t.update(window_seconds=1e308), "window_seconds"),
    ],
)
def test_unbounded_telemetry_is_refused_before_the_figures(tmp_path, change, field):
    exp = experiment(tmp_path)
    edit(exp / "results" / "native-r2.json", lambda d: change(d["ranks"][0]["telemetry"]))
    drift = tmp_path / "drift.png"
    refused([str(exp), "--drift", str(drift)], "native-r2.json", f"ranks.0.telemetry.{field}")
    refused([str(exp), "--format", "html"], "native-r2.json", field)
    assert not drift.exists()


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("started_utc", "2026-12-04T20:39:51"),  # no zone: read as local time elsewhere
        ("finished_utc", "2026-12-04T20:39:51+02:00"),
        ("started_utc", "yesterday"),
    ],
)
def test_a_time_that_is_not_utc_is_refused(tmp_path, field, text):
    exp = experiment(tmp_path)
    edit(exp / "results" / "native-r2.json", lambda d: d["environment"].update({field: text}))
    refused([str(exp), "--drift", str(tmp_path / "d.png")], f"environment.{field}", "UTC")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: [r.update(seconds=1e308) for r in d["runs"]], "runs.0.seconds"),
        (lambda d: d["runs"][1]["chunk_host_ms"].__setitem__(0, 1e308), "chunk_host_ms"),
        (lambda d: d["runs"][0]["chunk_ms"].__setitem__(0, 1e-300), "chunk_ms"),
        (lambda d: d["runs"][0].update(seconds=1e-3), "runs.0.seconds"),
        (lambda d: d["runs"][0]["order"].pop(), "runs.0"),
        (lambda d: d["runs"][0].update(order=[0] * len(d["runs"][0]["order"])), "runs.0.order"),
        (lambda d: d.update(schema_version=True), "schema_version True"),
        (lambda d: d.update(chunk_steps=10**400), "chunk_steps"),
        (lambda d: d["arms"][1].update(label=f"fabric\n{FORGED}"), "arms.1.label"),
    ],
)
def test_an_interleaved_result_out_of_bounds_is_refused_in_every_format(tmp_path, change, field):
    path = tmp_path / "interleaved.json"
    shutil.copy(INTERLEAVED, path)
    edit(path, change)
    for fmt in ("text", "markdown", "json", "html"):
        refused([str(path), "--format", fmt], str(path), field)


# --- causes 6, 7, 8: text from files made safe for each format ---


def test_a_file_name_cannot_forge_a_line_of_the_report(tmp_path):
    exp = experiment(tmp_path)
    forged = exp / f"x\n{FORGED}\n.json"
    (exp / "results" / "fabric-r1.json").rename(forged)
    files = [str(p) for p in sorted((exp / "results").glob("*.json"))] + [str(forged)]
    for fmt in FORMATS:
        code, out, err = compare(*files, "--format", fmt, "--verbose")
        assert code == 0, err
        assert_safe(fmt, out)
        assert re.search(r"x\\+nFORGED", out)  # shown, escaped (markdown escapes the \\ too)


def test_an_output_name_cannot_forge_a_line_of_what_compare_says(tmp_path):
    exp = experiment(tmp_path)
    target = tmp_path / f"r\n{FORGED}\n.txt"
    code, _, err = compare(str(exp), "--output", str(target))
    assert code == 0, err
    assert target.is_file() and not any(line.startswith("FORGED") for line in err.splitlines())
    (said,) = [line for line in err.splitlines() if "wrote" in line]
    assert said.endswith(f"r\\n{FORGED}\\n.txt")  # one line, the newlines shown escaped


def test_markup_in_names_and_labels_is_escaped_in_markdown(tmp_path):
    exp = experiment(tmp_path)
    (exp / "results" / "fabric-r1.json").rename(exp / "results" / "<img src=x onerror=1>.json")
    link = "[x](javascript:alert(1))"

    def relabel(manifest: dict) -> None:
        for item in [*manifest["arms"], *manifest["runs"]]:
            item["label"] = link if item["label"] == "fabric" else item["label"]
            if item.get("result") == "results/fabric-r1.json":
                item["result"] = "results/<img src=x onerror=1>.json"

    edit(exp / "manifest.json", relabel)
    code, out, err = compare(str(exp), "--format", "markdown", "--verbose")
    assert code == 0, err
    assert_safe("markdown", out)
    assert "\\<img src=x onerror=1\\>.json" in out and "\\[x\\](javascript:alert(1))" in out
    code, page, err = compare(str(exp), "--format", "html")
    assert code == 0 and "&lt;img src=x onerror=1&gt;.json" in page, err


def test_csv_cells_a_spreadsheet_would_run_are_quoted_and_numbers_stay_numbers(tmp_path):
    exp = experiment(tmp_path)
    (exp / "results" / "fabric-r1.json").rename(exp / "results" / "=1+2.json")

    def relabel(manifest: dict) -> None:
        for item in [*manifest["arms"], *manifest["runs"]]:
            item["label"] = "@SUM(A1)" if item["label"] == "fabric" else item["label"]
            if item.get("result") == "results/fabric-r1.json":
                item["result"] = "results/=1+2.json"

    edit(exp / "manifest.json", relabel)
    code, out, err = compare(str(exp), "--format", "csv")
    assert code == 0, err
    assert_safe("csv", out)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert "'=1+2.json" in {r["name"] for r in rows} and "'@SUM(A1)" in {r["arm"] for r in rows}
    changes = [float(r["steady_state_change_percent"]) for r in rows]  # numbers, never quoted
    assert min(changes) < 0


# --- smaller: impossible layouts, no NaN, errors that name the input ---


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda runs: runs[4].update(label="native"), "label: block 2 holds two runs"),
        (lambda runs: [r.update(position=1) for r in runs], "position"),
        (lambda runs: runs[3].update(block=0), "runs.3.block"),
        (lambda runs: runs[3].update(position=10**400), "runs.3.position"),
        (lambda runs: runs[3].update(seconds=1e308), "runs.3.seconds"),
    ],
)
def test_an_impossible_block_layout_is_refused_at_load(tmp_path, change, field):
    exp = experiment(tmp_path)
    edit(exp / "manifest.json", lambda m: change(m["runs"]))
    refused([str(exp)], "manifest.json", field)


def test_no_complete_block_gives_no_estimate_never_nan(tmp_path):
    """Each block lost one arm's run: a layout the experiment can write, with nothing paired."""
    exp = experiment(tmp_path)

    def fail_alternately(manifest: dict) -> None:
        for run in manifest["runs"]:
            if run["block"] and (run["label"] == "fabric") == (run["block"] % 2 == 1):
                run.update(status="failed", result=None, exit_status=1)

    edit(exp / "manifest.json", fail_alternately)
    for fmt in FORMATS:
        code, out, err = compare(str(exp), "--format", fmt)
        assert code == 0, err
        assert_safe(fmt, out)
        assert re.search(r"\bnan\b", out, re.IGNORECASE) is None, out
    assert "fabric vs native, 1 GPU: no estimate" in compare(str(exp))[1]


# --- the property: mutated numbers and hostile names through every format ---


def _leaves(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths of every number and every text in a JSON document (lists: first two items)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value[:2]) for p in _leaves(v, (*path, i))]
    return [path] if isinstance(value, (int, float, str)) and not isinstance(value, bool) else []


def _set(doc: Any, path: tuple, value: Any) -> None:
    """Set the value at `path` of a JSON document."""
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


# Every number and text of a result with telemetry and energy, and of the manifest
LEAVES = [
    (name, path)
    for name in ("results/native-r2.json", "manifest.json")
    for path in _leaves(json.loads((GPU / name).read_text()))
]
NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -0.0, 5e-324, 1e-300, 1e-7, 1e300, 1e308, -1e308, 10**400, -(10**400)]),
)
NAMES = st.lists(
    st.one_of(
        st.sampled_from(NASTY),
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), max_size=8
        ),
    ),  # fmt: skip
    min_size=1,
    max_size=4,
).map("".join)
PROPERTY = settings(
    derandomize=True,
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY
@given(leaf=st.sampled_from(LEAVES), value=st.one_of(NUMBERS, NAMES))
def test_mutated_values_give_a_safe_report_or_one_line(tmp_path_factory, leaf, value):
    exp = experiment(tmp_path_factory.mktemp("m"))
    name, path = leaf
    edit(exp / name, lambda doc: _set(doc, path, value))
    before = digests(exp)
    for fmt in FORMATS:
        report_or_one_line([str(exp)], fmt)
    assert digests(exp) == before


@PROPERTY
@given(name=NAMES, where=st.sampled_from(["file", "label", "hostname", "interleaved"]))
def test_hostile_names_and_labels_are_safe_in_every_format(tmp_path_factory, name, where):
    exp = experiment(tmp_path_factory.mktemp("n"))
    argv = [str(exp)]
    copy = exp / "results" / f"{name}.json"
    if where == "file" and "/" not in name and len(name.encode()) < 200 and not copy.exists():
        (exp / "results" / "fabric-r1.json").rename(copy)
        argv = [str(p) for p in sorted((exp / "results").glob("*.json"))]
    elif where == "label":
        edit(exp / "manifest.json", lambda m: [
            item.update(label=name) for item in [*m["arms"], *m["runs"]]
            if item["label"] == "fabric"
        ])  # fmt: skip
    elif where == "hostname":
        edit(exp / "results" / "fabric-r1.json", lambda d: d["ranks"][0].update(hostname=name))
    elif where == "interleaved":
        path = exp / "interleaved.json"
        shutil.copy(INTERLEAVED, path)
        edit(path, lambda d: d["arms"][1].update(label=name))
        argv = [str(path)]
    formats = FORMATS if where != "interleaved" else ("text", "markdown", "json")
    for fmt in formats:
        report_or_one_line(argv, fmt)


@pytest.mark.parametrize("name", ["<img src=x onerror=alert(1)>", "[x](javascript:1)", "\u202e"])
def test_hostile_labels_are_safe_in_the_html_page(tmp_path, name):
    exp = experiment(tmp_path)
    edit(exp / "manifest.json", lambda m: [
        item.update(label=f"fabric{name}") for item in [*m["arms"], *m["runs"]]
        if item["label"] == "fabric"
    ])  # fmt: skip
    code = report_or_one_line([str(exp)], "html")
    assert code == (0 if f"fabric{name}".isprintable() else 2)
