"""The result schema: round trip, published schema, malformed files rejected, no-clobber writes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from common.output import OutputError
from common.result import Result, ResultError, load_result, write_result

REAL = ROOT / "results" / "h200" / "precisions" / "native-bf16-r1.json"
ORIGINAL = ROOT / "tests" / "data" / "original" / "native-h200-b256.json"


def real() -> dict:
    return json.loads(REAL.read_text())


def test_a_real_result_round_trips(tmp_path):
    result = load_result(REAL)
    assert isinstance(result, Result)
    write_result(result, tmp_path / "copy.json", overwrite=False)
    assert load_result(tmp_path / "copy.json") == result


def test_published_schema_matches_the_code():
    published = json.loads((ROOT / "schema" / "result.schema.json").read_text())
    fresh = json.loads(
        subprocess.run(
            [sys.executable, "-m", "common", "schema"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert published == fresh, (
        "regenerate with: python -m common schema > schema/result.schema.json"
    )


def test_original_scripts_flat_results_load():
    original = load_result(ORIGINAL)
    assert original.implementation == "native" and original.images_per_second > 2000


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d.pop("images_per_second"), r"field images_per_second: Field required"),
        (lambda d: d.update(world_size="two"), r"field world_size"),
        (lambda d: d.update(schema_version=99), r"schema_version 99 is not supported"),
        (lambda d: d["ranks"][0].update(step_times_ms=[]), r"field ranks.0.step_times_ms"),
        (lambda d: d.update(implementation="deepspeed"), r"field implementation"),
        (lambda d: d.update(surprise=1), r"field surprise: Extra inputs are not permitted"),
    ],
)
def test_malformed_results_name_file_and_field(tmp_path, mutate, message):
    data = real()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultError, match=rf"^{path}: .*{message}"):
        load_result(path)


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"schema_version": 1, ', "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"elapsed_seconds": NaN}', "not valid JSON"),
    ],
)
def test_unreadable_json_is_named(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ResultError, match=message):
        load_result(path)


def test_write_never_replaces_an_existing_file_without_overwrite(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("precious")
    with pytest.raises(OutputError, match=rf"--output {path} already exists"):
        write_result(load_result(REAL), path, overwrite=False)
    assert path.read_text() == "precious"
    assert list(tmp_path.iterdir()) == [path]  # no temp file left behind
    write_result(load_result(REAL), path, overwrite=True)
    assert load_result(path).implementation == "native"


@pytest.mark.parametrize(
    "mode, noted",
    [
        ("default", False),
        ("reduce-overhead", True),
        ("max-autotune", True),
        ("max-autotune-no-cudagraphs", False),
    ],
)
def test_summary_says_when_peak_allocated_leaves_out_cuda_graph_memory(mode, noted, capsys):
    from common.report import print_summary

    data = real()
    data["config"].update(compile=True, compile_mode=mode)
    print_summary(Result.model_validate(data), None, "title")
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "peak allocated" in ln)
    assert line.rstrip().endswith("GiB") is not noted and ("CUDA graphs' pool" in line) is noted


def test_summary_gives_the_gpu_busy_share_of_the_timed_step(capsys):
    from common.report import print_summary

    data = real()
    median = data["step_time_ms"]["median"]
    data["gpu_activity"] = {
        "profiled_steps": 5,
        "gpu_busy_fraction": 0.5,
        "kernels_per_step": 1300.0,
        "gpu_ms_per_step": 0.95 * median,
        "wall_ms_per_step": 2 * median,
        "gpu_busy_ms_per_step": 0.95 * median,
        "gpu_busy_share_of_timed_step": 0.95,
        "host_bound": False,
    }
    print_summary(Result.model_validate(data), None, "title")
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "GPU busy" in ln)
    assert "95.0% of the timed step (GPU-bound;" in line and "1300 kernels/step" in line
