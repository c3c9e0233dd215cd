"""The result schema: round trip, published schema, older versions brought to this one at the
door, malformed files rejected, no-clobber writes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from common.output import OutputError
from common.result import SCHEMA_VERSION, Result, ResultError, load_result, write_result
from common.upgrade import upgraded

REAL = ROOT / "results" / "h200" / "precisions" / "native-bf16-r1.json"
ORIGINAL = ROOT / "tests" / "data" / "original" / "native-h200-b256.json"


def real() -> dict:
    """REAL (a version-1 file) as this version names it."""
    return upgraded(REAL, json.loads(REAL.read_text()))


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


def test_original_scripts_flat_results_load_in_this_versions_names():
    flat = json.loads(ORIGINAL.read_text())
    original = load_result(ORIGINAL)
    assert original.implementation == "native" and original.schema_version == SCHEMA_VERSION
    assert original.samples_per_second == flat["images_per_second"] > 2000
    assert original.precision.resolved == flat["precision_resolved"] == "bf16"
    w = original.workload  # what the original scripts always ran, from their model and data
    assert (w.name, w.title, w.unit, w.unit_label, w.units_per_sample) == (
        "image", "resnet50", "images", "img", 1
    )  # fmt: skip
    assert w.options == {"arch": "resnet50", "image_size": 224, "num_classes": 1000,
                         "channels_last": False}  # fmt: skip
    assert original.config["accelerator"] == "gpu" and not original.config["compile"]


def test_a_version_1_result_is_read_as_version_2_with_the_same_numbers():
    """Names that say what they count, each fact once; nothing on disk changes."""
    before = REAL.read_bytes()
    v1 = json.loads(before)
    r = load_result(REAL)
    assert REAL.read_bytes() == before and r.schema_version == 2 == SCHEMA_VERSION
    assert r.samples_per_second == v1["images_per_second"]
    assert r.samples_per_second_median == v1["images_per_second_median"]
    assert r.samples_per_second_per_device == v1["images_per_second_per_device"]
    # an image is one unit of work
    assert (r.units_per_second, r.units_per_second_median) == (
        v1["images_per_second"], v1["images_per_second_median"]
    )  # fmt: skip
    assert r.energy is None  # older than energy
    assert r.workload.options["arch"] == v1["config"]["arch"] and "arch" not in r.config
    assert r.precision.resolved == v1["precision_resolved"]
    assert r.environment.torchvision_version == v1["torchvision_version"]
    assert not {"precision_resolved", "torchvision_version"} & set(r.model_dump())


def test_a_version_1_results_energy_is_per_sample_and_per_unit():
    path = ROOT / "results" / "h200" / "telemetry" / "original-workload-2026-12-05" / "results"
    v1 = json.loads((path / "native-r1.json").read_text())
    r = load_result(path / "native-r1.json")
    assert r.energy is not None and r.energy.joules_per_sample == v1["energy"]["joules_per_image"]
    assert r.energy.joules_per_unit == r.energy.joules_per_sample  # an image is the unit
    rank, old = r.ranks[0].telemetry, v1["ranks"][0]["telemetry"]
    assert rank is not None and rank.joules_per_sample == old["joules_per_image"]


def test_a_version_1_gpt_result_keeps_its_units(tmp_path):
    """Version 1's units_per_second counted tokens from the median step."""
    path = ROOT / "results" / "h100" / "gpt-2026-12-06" / "gpu-bound" / "results" / "native-r1.json"
    v1 = json.loads(path.read_text())
    r = load_result(path)
    tokens = v1["workload"]["units_per_sample"]
    assert r.workload.unit_label == "tok" and tokens > 1
    assert r.units_per_second_median == v1["units_per_second"]
    assert r.units_per_second == pytest.approx(v1["images_per_second"] * tokens, rel=1e-12)
    assert "gpt_width" in r.workload.options and "gpt_width" not in r.config


def test_a_version_1_result_whose_precisions_disagree_is_refused(tmp_path):
    data = json.loads(REAL.read_text())
    data["precision_resolved"] = "fp16"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultError, match="precision_resolved 'fp16' disagrees with precision"):
        load_result(path)


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d.pop("samples_per_second"), r"field samples_per_second: Field required"),
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


@pytest.mark.parametrize("name", ["joules_per_sample", "joules_per_unit"])
def test_an_energy_per_sample_or_unit_below_a_nanojoule_is_no_measurement(tmp_path, name):
    path = ROOT / "results" / "h200" / "telemetry" / "original-workload-2026-12-05" / "results"
    data = upgraded(path, json.loads((path / "native-r1.json").read_text()))
    data["energy"][name] = 1e-12
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ResultError, match=rf"field energy\.{name}"):
        load_result(bad)
