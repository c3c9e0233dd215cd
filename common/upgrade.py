"""Older results brought to the current schema at the door, before they are validated.

    data = upgraded(path, read_json(path))   # schema version 2, whatever version the file has

Three kinds of file are read: this version's (as they are), version 1 (the suite's results
before throughput and energy were named by what they count) and the flat results of the
original single-file scripts (no schema_version). common.result's loaders call this once,
then validate the version-2 document; nothing else reads an older name, and nothing on disk is
rewritten. What each older kind lacks is filled in here from what it recorded:

- version 1: images_per_second[_median|_per_device] count samples (a gpt sequence), and
  units_per_second counted the workload's unit from the median step: samples_per_second...,
  units_per_second_median; joules_per_image is joules_per_sample. The workload's options
  leave `config` for `workload.options`; the precision and torchvision's version are kept
  once (`precision`, `environment`). A result older than workloads trained the image
  workload: its `workload` is made from `config`. A result older than the GPU's busy share
  gets it from its profiled window, and one older than the run's host time its ranks' mean.
- the original scripts: their flat fields renamed the same way, the image workload read from
  `model` and `data`, and `config` what those scripts always ran (ORIGINAL_CONFIG).

Imports no torch and nothing of common.result: the models validate what this returns.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from common import workloads
from common.errors import ResultError, one_line

VERSION = 2  # common.result.SCHEMA_VERSION
IMAGE = "image"  # the workload of every result written before workloads, and of the originals
# A version-1 workload's unit -> its short label, as column headers name it (img/s)
UNIT_LABELS = {"images": "img", "tokens": "tok"}
# The original scripts had none of these options: they always ran like this (their README).
ORIGINAL_CONFIG: dict[str, Any] = {
    "workload": IMAGE,
    "accelerator": "gpu",
    "compile": False,
    "compile_mode": None,
    "cudnn_benchmark": True,
    "sgd_impl": "auto",
    "bucket_cap_mb": 25.0,
    "gradient_as_bucket_view": True,
    "static_graph": False,
    "broadcast_buffers": True,
}
ORIGINAL_IMAGE_OPTIONS = {"num_classes": 1000, "channels_last": False}
# The flat fields of the original scripts that version 2 keeps under their names
ORIGINAL_FIELDS = (
    "model", "data", "batch_mode", "batch_size_per_device", "global_batch_size", "world_size",
    "warmup_steps", "measured_steps", "seed", "elapsed_seconds", "milliseconds_per_step",
    "final_loss_mean", "peak_allocated_gib", "peak_reserved_gib",
    "parameter_checksum_max_difference", "parameters_synchronized", "gpu_name_rank_zero",
    "hostname_rank_zero", "pytorch_version", "torchvision_version", "cuda_version",
    "cudnn_version", "python_version", "slurm_job_id", "lightning_version", "lightning_barebones",
)  # fmt: skip
# Version 1's throughput names -> version 2's
SAMPLES = {
    "images_per_second": "samples_per_second",
    "images_per_second_median": "samples_per_second_median",
    "images_per_second_per_device": "samples_per_second_per_device",
}


def upgraded(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a result of separate runs or an interleaved one, as read) in this version;
    ResultError for a version this suite never wrote (an int: True == 1 is none)."""
    if "schema_version" not in data and data.get("kind") is None:
        return from_original(data)
    version = data.get("schema_version")
    if type(version) is not int or version not in (1, VERSION):
        raise ResultError(
            f"{path}: schema_version {one_line(repr(version))[:40]} is not supported"
            f" (this suite reads 1 and {VERSION}, and the original scripts' results)"
        )
    return data if version == VERSION else from_version_1(path, data)


def from_version_1(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 result (of separate runs, or interleaved) in version 2's names."""
    out = {**data, "schema_version": VERSION}
    _one_precision(path, out)
    out.pop("torchvision_version", None)  # environment.torchvision_version keeps it
    config = out.get("config")
    trained = out.get("workload")
    if isinstance(config, dict):
        if trained is None:  # older than workloads: the image workload, its options in config
            trained = _image_workload(config)
        if isinstance(trained, dict):
            options = trained.get("options")
            names = set(options) if isinstance(options, dict) else set()
            out["config"] = {k: v for k, v in config.items() if k not in names}
    if isinstance(trained, dict) and "unit_label" not in trained:
        unit = trained.get("unit")
        trained = {**trained, "unit_label": UNIT_LABELS.get(unit, unit)}
    out["workload"] = trained
    if out.get("kind") is None:  # a result of separate runs
        _throughput(out, _units(trained))
        _energy(out, _units(trained))
        _busy_share(out)
        _host_time(out)
    return out


def from_original(data: dict[str, Any]) -> dict[str, Any]:
    """An original script's flat result in version 2's names (extra fields left out)."""
    out = {name: data[name] for name in ORIGINAL_FIELDS if name in data}
    if "images_per_second" in data:
        out["samples_per_second"] = data["images_per_second"]
    model, text = data.get("model"), data.get("data")
    arch = model.rsplit(".", 1)[-1] if isinstance(model, str) else None
    return {
        **out,
        "schema_version": VERSION,
        # the original Lightning script adds lightning_version; the native one does not
        "implementation": "lightning" if data.get("lightning_version") else "native",
        "precision": {
            "requested": data.get("precision_requested"),
            "resolved": data.get("precision_resolved"),
        },
        "config": dict(ORIGINAL_CONFIG),
        "workload": _image(
            arch, {"arch": arch, "image_size": _image_size(text), **ORIGINAL_IMAGE_OPTIONS}
        ),
    }


def _image(title: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What a result records of the image workload (common.workloads.info's fields)."""
    return {
        "name": IMAGE, "title": title, "unit": "images", "unit_label": "img", "sample": "image",
        "units_per_sample": 1, "options": options, "flops_per_sample": None,
    }  # fmt: skip


def _image_workload(config: dict[str, Any]) -> dict[str, Any]:
    """The image workload of a result older than workloads: its options as `config` has them."""
    names = workloads.option_names(workloads.resolve(IMAGE))
    return _image(config.get("arch"), {k: config[k] for k in names if k in config})


def _image_size(data: Any) -> int | str | None:
    """The side of the images in the originals' `data` text ('... 3x224x224 images ...')."""
    match = re.search(r"\d+x(\d+)x(\d+)", data) if isinstance(data, str) else None
    if match is None:
        return None
    height, width = int(match.group(1)), int(match.group(2))
    return height if height == width else f"{height}x{width}"


def _number(value: Any) -> float | None:
    """A number read from a file (a boolean is none), else None: validation names the field."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _units(trained: Any) -> float | None:
    """Units of work in one sample (a gpt sequence's tokens), as the workload recorded it."""
    return _number(trained.get("units_per_sample")) if isinstance(trained, dict) else None


def _one_precision(path: Path, out: dict[str, Any]) -> None:
    """The precision once (`precision`): the top-level copies must agree with it."""
    precision = out.get("precision")
    for name in ("requested", "resolved"):
        flat = out.pop(f"precision_{name}", None)
        kept = precision.get(name) if isinstance(precision, dict) else None
        if flat is not None and kept is not None and flat != kept:
            raise ResultError(
                f"{path}: field precision_{name} {one_line(repr(flat))[:40]} disagrees with"
                f" precision.{name} {one_line(repr(kept))[:40]}; one of them is not the run's"
            )


def _throughput(out: dict[str, Any], units: float | None) -> None:
    """Samples per second by their name; units per second (wall clock, median, per device)."""
    median = out.pop("units_per_second", None)  # version 1's: from the median step
    for old, new in SAMPLES.items():
        if old in out:
            out[new] = out.pop(old)
    if units is None:
        return
    out["units_per_second"] = _times(out.get("samples_per_second"), units)
    if median is None:
        median = _times(out.get("samples_per_second_median"), units)
    out["units_per_second_median"] = median
    if out.get("units_per_second_per_device") is None:
        per_device = _times(out.get("samples_per_second_per_device"), units)
        out["units_per_second_per_device"] = per_device


def _times(value: Any, units: float) -> float | None:
    """value x units, where value is a number (else None: validation names the field)."""
    number = _number(value)
    return None if number is None else number * units


def _energy(out: dict[str, Any], units: float | None) -> None:
    """J per sample by its name (the summary and each rank's); J per unit where older results
    had none (an image is one)."""
    energy = out.get("energy")
    if isinstance(energy, dict) and "joules_per_image" in energy:
        energy = dict(energy)
        energy["joules_per_sample"] = energy.pop("joules_per_image")
        per_sample = _number(energy["joules_per_sample"])
        if energy.get("joules_per_unit") is None and per_sample is not None and units:
            energy["joules_per_unit"] = per_sample / units
        out["energy"] = energy
    ranks = out.get("ranks")
    for rank in ranks if isinstance(ranks, list) else ():
        telemetry = rank.get("telemetry") if isinstance(rank, dict) else None
        if isinstance(telemetry, dict) and "joules_per_image" in telemetry:
            telemetry["joules_per_sample"] = telemetry.pop("joules_per_image")


def _busy_share(out: dict[str, Any]) -> None:
    """The GPU's busy share of the timed step where an older result has only its profiled
    window's busy fraction (kernel time / wall time of a profiled step) over the median timed
    step, at most 1 (common.result.timed_share); left unknown for older traced results whose
    kernel time exceeds the wall time: they counted annotated ranges as GPU work."""
    activity, steps = out.get("gpu_activity"), out.get("step_time_ms")
    if not isinstance(activity, dict) or activity.get("gpu_busy_share_of_timed_step") is not None:
        return
    fraction, wall, kernels = (
        _number(activity.get(k))
        for k in ("gpu_busy_fraction", "wall_ms_per_step", "gpu_ms_per_step")
    )
    median = _number(steps.get("median")) if isinstance(steps, dict) else None
    if None in (fraction, wall, kernels, median) or kernels > wall:  # type: ignore[operator]
        return
    share = min(fraction * wall / median, 1.0) if median > 0 else 0.0  # type: ignore[operator]
    out["gpu_activity"] = {**activity, "gpu_busy_share_of_timed_step": share}


def _host_time(out: dict[str, Any]) -> None:
    """The run's host ms per step where an older result has only its ranks' (their mean)."""
    ranks = out.get("ranks")
    if out.get("host_ms_per_step") is not None or not isinstance(ranks, list) or not ranks:
        return
    each = [_number(r.get("host_ms_per_step")) if isinstance(r, dict) else None for r in ranks]
    if all(ms is not None for ms in each):
        out["host_ms_per_step"] = sum(each) / len(each)  # type: ignore[arg-type]
