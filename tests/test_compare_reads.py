"""What compare reads: regular files only, bounded, inside the folder,
strict JSON, never its own outputs, duplicates named and given no verdict."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.result import MAX_READ_BYTES, read_json
from compare.api import analyse_paths
from compare.cli import main
from compare_factory import make_result, write

FAST = settings(
    derandomize=True,
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """compare ARGV exits 2 with one line and no traceback; that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def folder(tmp_path: Path, runs: list[dict], name: str = "exp") -> Path:
    """An experiment folder with a manifest listing RUNS (label, result, status)."""
    out = tmp_path / name
    (out / "results").mkdir(parents=True)
    records = []
    for i, run in enumerate(runs, 1):
        records.append(
            {
                "index": i,
                "block": 1,
                "position": i,
                "label": run["label"],
                "runner": "native",
                "repeat": 1,
                "command": [],
                "result": run.get("result"),
                "log": f"logs/{i}.log",
                "status": run.get("status", "ok"),
                "exit_status": 0,
                "started_utc": "",
                "finished_utc": "",
                "seconds": 1.0,
            }
        )
    manifest = {
        "manifest_version": 1,
        "experiment": None,
        "created_utc": "",
        "command": [],
        "baseline": "native",
        "arms": [{"label": "native", "runner": "native", "argv": []}],
        "runner_options": [],
        "runs": records,
    }
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


# --- only regular files, bounded ------------------------------------------------------------


def test_a_fifo_is_refused_without_opening_it(tmp_path, capsys):
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    good = write(tmp_path / "n.json", make_result("native"))
    result: list[str] = []
    worker = threading.Thread(
        target=lambda: result.append(one_line_exit_2([str(good), str(fifo)], capsys)), daemon=True
    )
    worker.start()
    worker.join(timeout=60)
    if worker.is_alive():  # unblock the reader so the test run can end, then fail
        with open(fifo, "w"):
            pass
        pytest.fail("compare blocked on a FIFO")
    assert "only regular files are read" in result[0] and str(fifo) in result[0]


def test_a_device_is_refused_and_a_huge_file_is_read_only_up_to_the_bound(tmp_path, capsys):
    good = str(write(tmp_path / "n.json", make_result("native")))
    assert "only regular files are read" in one_line_exit_2([good, "/dev/zero"], capsys)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_READ_BYTES + 1)  # sparse: costs no disk
    assert "larger than 64 MiB" in one_line_exit_2([good, str(big)], capsys)


def test_a_manifest_naming_dev_zero_or_leaving_the_folder_is_refused(tmp_path, capsys):
    write(tmp_path / "outside.json", make_result("native"))
    cases = {
        "/dev/zero": "must be relative to the folder",
        "../outside.json": "must be relative to the folder",
        "results/../../outside.json": "must be relative to the folder",
        "results/link.json": "leads outside the folder",
        "results/fifo.json": "only regular files are read",
        "results/inner-link.json": "is a symbolic link",
    }
    for i, (result, words) in enumerate(cases.items()):
        out = folder(tmp_path, [{"label": "native", "result": result}], f"exp{i}")
        (out / "results" / "link.json").symlink_to(tmp_path / "outside.json")
        os.mkfifo(out / "results" / "fifo.json")
        write(out / "results" / "real.json", make_result("native"))
        (out / "results" / "inner-link.json").symlink_to(out / "results" / "real.json")
        err = one_line_exit_2([str(out)], capsys)
        assert words in err, (result, err)


def test_a_folder_with_no_successful_run_is_one_line_not_an_index_error(tmp_path, capsys):
    out = folder(
        tmp_path,
        [{"label": "native", "status": "failed"}, {"label": "lightning", "status": "failed"}],
    )
    err = one_line_exit_2([str(out)], capsys)
    assert "no run with status ok in manifest.json (2 recorded, 2 failed)" in err


# --- strict JSON and schema -----------------------------------------------------------------


def test_duplicate_keys_are_refused_at_any_depth(tmp_path, capsys):
    good = str(write(tmp_path / "n.json", make_result("native")))
    text = (tmp_path / "n.json").read_text()
    bad = tmp_path / "bad.json"
    bad.write_text(text.replace('"world_size": 1', '"world_size": 1, "world_size": 2', 1))
    assert '"world_size" appears twice' in one_line_exit_2([good, str(bad)], capsys)
    bad.write_text(text.replace('"arch": "resnet50"', '"arch": "resnet50", "arch": "vit"', 1))
    assert '"arch" appears twice' in one_line_exit_2([good, str(bad)], capsys)


@pytest.mark.parametrize(
    ("where", "value", "words"),
    [
        (("world_size",), True, "field world_size"),
        (("measured_steps",), True, "field measured_steps"),
        (("config", "bucket_cap_mb"), True, "field config.bucket_cap_mb: True is not int or float"),
        (("config", "compile"), 0, "field config.compile: 0 is not bool"),
        (("ranks", 0, "rank"), 5, "rank ids 5 are not 0..0 once each"),
    ],
)
def test_a_boolean_is_not_an_integer_and_ranks_lie_in_the_world(
    tmp_path, capsys, where, value, words
):
    good = str(write(tmp_path / "n.json", make_result("native")))
    data = json.loads((tmp_path / "n.json").read_text())
    node = data
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert words in one_line_exit_2([good, str(bad)], capsys)


def test_rank_ids_must_be_unique(tmp_path, capsys):
    good = str(write(tmp_path / "n.json", make_result("native")))
    data = json.loads(write(tmp_path / "two.json", make_result("native", world_size=2)).read_text())
    data["ranks"][1]["rank"] = 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert "rank ids 0, 0 are not 0..1 once each" in one_line_exit_2([good, str(bad)], capsys)


def test_step_times_far_apart_or_overflowing_give_one_line(tmp_path, capsys):
    good = str(write(tmp_path / "n.json", make_result("native")))
    for steps in ([1e300] * 5, [1e-300] * 5, [1e200, 1e200, 1e-200, 1e200, 1e200]):
        steps = steps * 10  # 50 measured steps
        path = tmp_path / "x.json"
        path.unlink(missing_ok=True)
        data = json.loads((tmp_path / "n.json").read_text())
        data["ranks"][0]["step_times_ms"] = steps
        path.write_text(json.dumps(data))
        assert "not a measurement" in one_line_exit_2([good, str(path)], capsys)


EXTREME = (
    st.sampled_from([10**400, 2**64, -(2**64), 0, True, 1e308, 5e-324, -1e308, 1e-300])
    | st.integers()
    | st.floats(allow_nan=False)
)


@FAST
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "world_size",
                    "global_batch_size",
                    "seed",
                    "batch_size_per_device",
                    "elapsed_seconds",
                    "milliseconds_per_step",
                    "samples_per_second",
                    "final_loss_mean",
                    "step0",
                    "step1",
                    "loss0",
                    "measured_steps",
                    "warmup_steps",
                ]
            ),
            EXTREME,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_extreme_numbers_load_or_give_one_line_never_a_traceback(changes):
    with tempfile.TemporaryDirectory() as where:
        good = write(Path(where) / "n.json", make_result("native"))
        data = json.loads(good.read_text())
        for name, value in changes:
            if name.startswith("step"):
                data["ranks"][0]["step_times_ms"][int(name[-1])] = value
            elif name == "loss0":
                data["ranks"][0]["final_loss"] = value
            else:
                data[name] = value
        bad = Path(where) / "bad.json"
        bad.write_text(json.dumps(data))
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main([str(good), str(bad), "--allow-mismatch"])
    assert code in (0, 2), err.getvalue()
    if code == 2:
        assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue()


def test_read_json_refuses_what_is_not_one_json_object(tmp_path):
    from common.result import ResultError

    path = tmp_path / "x.json"
    for text, words in (
        ('{"a": 1, "a": 1}', "appears twice"),
        ("[1]", "expected a JSON object"),
        ('{"a": NaN}', "NaN is not allowed"),
        (b"\xff", "cannot read"),
    ):
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(ResultError, match=words):
            read_json(path)


# --- outputs are never inputs ---------------------------------------------------------------


@pytest.mark.parametrize("option", ["--output", "--plot"])
def test_an_output_never_replaces_an_input_or_the_manifest(tmp_path, capsys, option):
    out = folder(
        tmp_path,
        [
            {"label": "native", "result": "results/n.json"},
            {"label": "lightning", "result": "results/l.json"},
        ],
    )
    write(out / "results" / "n.json", make_result("native"))
    write(out / "results" / "l.json", make_result("lightning"))
    given_file = write(tmp_path / "g.json", make_result("native", seed=3))
    os.link(out / "results" / "l.json", tmp_path / "hard.png")
    os.link(out / "results" / "n.json", tmp_path / "hard.json")
    suffix = ".png" if option == "--plot" else ""
    targets = [
        out / "manifest.json",
        out / "results" / "n.json",
        tmp_path / "hard.png",
        tmp_path / "hard.json",
        given_file,
    ]
    before = {p: p.read_bytes() for p in targets}
    for target in targets:
        if option == "--plot" and target.suffix != ".png":
            continue
        args = [
            str(out),
            str(given_file),
            "--allow-mismatch",
            option,
            str(target),
            "--overwrite-output",
        ]
        assert "one of the inputs" in one_line_exit_2(args, capsys), (target, suffix)
    assert {p: p.read_bytes() for p in targets} == before


# --- duplicates -----------------------------------------------------------------------------


def test_copies_and_hard_links_given_as_repeats_are_named_and_give_no_verdict(tmp_path):
    files = [write(tmp_path / f"n{i}.json", make_result("native", seed=i)) for i in range(3)]
    files += [
        write(tmp_path / f"l{i}.json", make_result("lightning", seed=10 + i)) for i in range(3)
    ]
    report = analyse_paths(files)
    assert report.overhead[0].verdict_possible  # the honest repeats give a verdict
    shutil.copy(files[0], tmp_path / "copy.json")
    os.link(files[3], tmp_path / "link.json")
    report = analyse_paths([*files, tmp_path / "copy.json", tmp_path / "link.json"])
    [o] = report.overhead
    assert not o.verdict_possible and o.ci_low is None and "duplicated results" in o.verdict
    texts = [w.text for w in report.warnings if w.kind == "duplicate"]
    tail = "not a run of its own: no verdict"
    assert texts == [
        f"copy.json: is a copy or hard link of n0.json, {tail}",
        f"link.json: is a copy or hard link of l0.json, {tail}",
    ]


# --- labels are text ------------------------------------------------------------------------


def test_labels_are_text_shown_verbatim_and_control_characters_are_refused(tmp_path, capsys):
    label = "na$ti$ve <b>`x`"
    out = folder(
        tmp_path,
        [
            {"label": label, "result": "results/n.json"},
            {"label": "lightning", "result": "results/l.json"},
        ],
    )
    write(out / "results" / "n.json", make_result("native"))
    write(out / "results" / "l.json", make_result("lightning"))
    assert main([str(out), "--baseline", label]) == 0
    assert f"lightning vs {label}" in capsys.readouterr().out
    for bad in ("na\ntive", "na\x1b[31mtive", "na\x00"):
        manifest = json.loads((out / "manifest.json").read_text())
        manifest["runs"][0]["label"] = bad
        (out / "manifest.json").write_text(json.dumps(manifest))
        assert "holds control characters" in one_line_exit_2([str(out)], capsys)


# --- property tests: manifest paths and duplicate keys --------------------------------------

PARTS = st.sampled_from(
    [
        "results",
        "..",
        ".",
        "",
        "/",
        "x.json",
        "link",
        "up",
        "/etc/passwd",
        "a\\b",
        "~",
        "%2e%2e",
        "\u2025",
        " ",
    ]
)


@FAST
@given(st.lists(PARTS, min_size=1, max_size=5).map("/".join))
def test_a_manifest_path_resolves_inside_the_folder_or_is_refused(name):
    from common.result import ResultError
    from compare.load import inside

    with tempfile.TemporaryDirectory() as where:
        root = Path(where)
        (root / "exp" / "results").mkdir(parents=True)
        (root / "exp" / "link").symlink_to(root)  # a link that leads out
        (root / "exp" / "up").symlink_to("..")
        try:
            path = inside(root / "exp", name)
        except ResultError as error:
            assert "\n" not in str(error)
            return
        assert path.resolve().is_relative_to((root / "exp").resolve())


@FAST
@given(
    st.recursive(
        st.integers() | st.text(max_size=3),
        lambda inner: st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=8,
    ),
    st.text(max_size=4),
)
def test_any_object_with_a_key_given_twice_is_refused(doc, key):
    from common.result import ResultError, parse_json

    text = json.dumps({key: 1, "body": doc})
    duplicated = "{" + json.dumps(key) + ": 0, " + text[1:]
    with pytest.raises(ResultError, match="appears twice"):
        parse_json(Path("x.json"), duplicated.encode())
    assert parse_json(Path("x.json"), text.encode()) == {key: 1, "body": doc}
