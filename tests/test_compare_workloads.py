"""compare reads the workload of each run: units that follow it, a title that names it, and
one line refusing runs of different workloads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.result import EnergySummary, RankTelemetry, Result, WorkloadInfo
from compare import runs_frame
from compare.cli import main as compare_main
from compare_factory import make_result, write

TOKENS = 1024  # a gpt2-small sequence
GPT_OPTIONS = {
    "gpt_preset": "gpt2-small",
    "gpt_layers": 12,
    "gpt_width": 768,
    "gpt_heads": 12,
    "gpt_seq_len": TOKENS,
    "gpt_vocab": 50_304,
}


def gpt_result(implementation: str, seed: int, **options: object) -> Result:
    """A gpt run of 8 sequences per GPU, its energy measured, as the runners record one."""
    opts = {**GPT_OPTIONS, **options}
    gpt = WorkloadInfo(
        name="gpt",
        title="gpt (gpt2-small)",
        unit="tokens",
        unit_label="tok",
        sample="sequence",
        units_per_sample=TOKENS,
        options=opts,
        flops_per_sample=8.8e11,
    )
    r = make_result(implementation, seed=seed, batch_size_per_device=8, workload=gpt)
    per_step = 300.0
    steps = r.measured_steps
    ranks = [  # each rank's counter, which the energy summary adds up (compare.load checks it)
        rank.model_copy(
            update={
                "telemetry": RankTelemetry(
                    window_seconds=r.elapsed_seconds,
                    energy_joules=per_step * steps / len(r.ranks),
                    joules_per_step=per_step / len(r.ranks),
                    joules_per_sample=per_step / len(r.ranks) / r.batch_size_per_device,
                )
            }
        )
        for rank in r.ranks
    ]
    return r.model_copy(
        update={
            "ranks": ranks,
            "model": "GPT-style decoder (torch.nn): 12 layers x 768",
            "peak_flops_per_device": 989e12,
            "mfu": 0.4 + seed / 1000,
            "energy": EnergySummary(
                joules_per_step=per_step,
                joules_per_sample=per_step / r.global_batch_size,
                joules_per_unit=per_step / r.global_batch_size / TOKENS,
                watts=per_step * steps / r.elapsed_seconds,
            ),
        }
    )


def gpt_files(folder: Path, **options: object) -> list[Path]:
    """Three runs of native and three of fabric."""
    return [
        write(folder / f"{arm}-r{k}.json", gpt_result(arm, seed=10 * k + i, **options))
        for i, arm in enumerate(("native", "fabric"))
        for k in range(3)
    ]


def report(files: list[Path], *options: str, capsys) -> tuple[int, str, str]:
    code = compare_main([*map(str, files), *options])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_gpt_report_names_the_workload_first_and_counts_tokens(tmp_path, capsys):
    code, out, _ = report(gpt_files(tmp_path), capsys=capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "gpt (gpt2-small) on NVIDIA H200 · bf16 · 8 sequences/GPU · compile no"
    speed = out.split("Speed")[1].split("Start-up")[0]
    assert "tok/s ↑" in speed and "tok/s/GPU ↑" in speed and "J/token ↓" in speed
    assert "img/s" not in out and "J/image" not in out and "energy per image" not in out
    assert "J/token, native, 1 GPU:" in out and "energy per token, fabric vs native" in out
    assert "MFU ↑" in speed  # the median over runs: native's 40.0, 41.0, 42.0%; fabric's +0.1
    rows = {line.split()[0]: line for line in speed.splitlines() if line.strip()}
    assert rows["native"].endswith("41.0%") and rows["fabric"].endswith("41.1%"), speed


def test_a_gpt_reports_throughput_is_tokens_per_second(tmp_path, capsys):
    files = gpt_files(tmp_path)
    _, out, _ = report(files, "--format", "json", capsys=capsys)
    doc = json.loads(out)
    native = next(row for row in doc["table"] if row["arm"] == "native")
    runs = [Result.model_validate_json(p.read_text()) for p in files if "native" in p.name]
    medians = sorted(r.units_per_second_median for r in runs)
    assert native["units_per_second_median"] == pytest.approx(medians[1])  # median of three
    assert doc["work_unit"] == "tokens" and not [k for k in native if "image" in k]
    assert all("joules_per_unit" in run for run in doc["runs"])


def test_csv_and_dataframes_name_the_columns_by_what_they_count(tmp_path, capsys):
    files = gpt_files(tmp_path)
    _, out, _ = report(files, "--format", "csv", capsys=capsys)
    header = out.splitlines()[0].split(",")
    assert {"units_per_second", "units_per_second_median", "joules_per_unit"} <= set(header)
    assert not [name for name in header if "image" in name]
    frame = runs_frame(*files)
    assert "units_per_second" in frame.columns and "images_per_second" not in frame.columns
    assert frame.joules_per_unit.iloc[0] == pytest.approx(300.0 / 8 / TOKENS)


def test_runs_of_different_workloads_are_refused_even_with_allow_mismatch(tmp_path, capsys):
    gpt = write(tmp_path / "native.json", gpt_result("native", seed=1))
    image = write(tmp_path / "fabric.json", make_result("fabric", seed=2))
    for extra in ((), ("--allow-mismatch",)):
        code, out, err = report([gpt, image], *extra, capsys=capsys)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "the runs train different workloads (native gpt; fabric image)" in err
    with pytest.raises(Exception, match="different workloads"):
        runs_frame(gpt, image)


def test_gpt_runs_of_other_sizes_are_a_workload_mismatch_naming_the_size(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    small = gpt_files(tmp_path / "a")
    deeper = [write(tmp_path / "deep.json", gpt_result("fabric", seed=9, gpt_layers=24))]
    code, _, err = report([*small[:3], *deeper], capsys=capsys)
    assert code == 2 and "the runs measure different workloads" in err
    assert "gpt_layers: native 12, fabric 24" in err


def test_an_image_report_still_counts_images(tmp_path, capsys):
    files = [
        write(tmp_path / f"{arm}-{k}.json", make_result(arm, seed=10 * k + i))
        for i, arm in enumerate(("native", "fabric"))
        for k in range(2)
    ]
    _, out, _ = report(files, capsys=capsys)
    assert out.splitlines()[0].startswith("resnet50 on NVIDIA H200 · bf16 · 32 images/GPU")
    assert "img/s ↑" in out and "tok/s" not in out
    assert "MFU" not in out  # no run knows it: no column of dashes


# --- a workload of one's own: what its declaration said, and its module's digest -------------

MLP = "examples.custom_workload:workload"
MLP_DIGEST = "a" * 64


def mlp_result(
    implementation: str,
    seed: int,
    *,
    model: str = "MLP 64-256-256-10 (examples/custom_workload.py)",
    unit: str = "samples",
    units: int = 1,
    flops: float | None = 4.1e5,
    digest: str = MLP_DIGEST,
) -> Result:
    """A run of the example workload, as the runners record one."""
    mlp = WorkloadInfo(
        name=MLP,
        title="mlp 256",
        unit=unit,
        unit_label=unit,
        sample="sample",
        units_per_sample=units,
        options={"mlp_width": 256},
        flops_per_sample=flops,
        module_digest=digest,
    )
    r = make_result(implementation, seed=seed, workload=mlp)
    return r.model_copy(update={"model": model, "config": {**r.config, "workload": MLP}})


def mlp_files(folder: Path, **fabric: object) -> list[Path]:
    """Two runs of native as declared, two of fabric with the declaration `fabric` changes."""
    return [
        write(folder / f"{arm}-r{k}.json", mlp_result(arm, 10 * k + i, **(fabric if i else {})))
        for i, arm in enumerate(("native", "fabric"))
        for k in range(2)
    ]


@pytest.mark.parametrize(
    "changed,field",
    [
        ({"model": "MLP 64-512-512-10 (examples/custom_workload.py)"}, "model: native MLP 64-256"),
        ({"flops": 8.2e5}, "flops_per_sample: native 410000, fabric 820000"),
        ({"flops": None}, "flops_per_sample: native 410000, fabric -"),
        ({"units": 4}, "units_per_sample: native 1, fabric 4"),
    ],
)
def test_a_user_workload_whose_declaration_changed_between_runs_is_a_mismatch(
    changed, field, tmp_path, capsys
):
    """Its options are the same, but its code was edited between the runs: the model or the
    work a sample counts differ, which the suite's source digest does not cover."""
    files = mlp_files(tmp_path, **changed)
    code, out, err = report(files, capsys=capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "the runs measure different workloads" in err and field in err, err
    code, out, _ = report(files, "--allow-mismatch", capsys=capsys)
    assert code == 0 and f"workload differs (allowed by --allow-mismatch): {field}" in out


def test_results_of_one_workload_that_count_different_units_are_refused_even_if_allowed(
    tmp_path, capsys
):
    """A result whose unit was changed (by hand, or by an edit of the workload) would be
    counted in the first run's unit."""
    files = mlp_files(tmp_path, unit="items")
    for extra in ((), ("--allow-mismatch",)):
        code, out, err = report(files, *extra, capsys=capsys)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "the runs of one workload count different units (native-r0.json samples" in err
        assert "fabric-r0.json items per sample" in err


def test_a_user_workloads_module_edited_between_runs_is_a_warning_naming_its_digest(
    tmp_path, capsys
):
    """The same declared model and work, other code (a change that does not show in what it
    declares): a difference of code, warned about as the suite's own source digest is."""
    code, out, _ = report(mlp_files(tmp_path, digest="b" * 64), capsys=capsys)
    assert code == 0
    assert "environment differs: workload source: native aaaaaaaaaaaa, fabric bbbbbbbbbbbb" in out
    same = tmp_path / "same"
    same.mkdir()
    _, out, _ = report(mlp_files(same), "--verbose", capsys=capsys)
    assert "workload source" in out and "environment differs: workload source" not in out
