"""Older results read as this schema version, at the door, before they are validated.

    data = upgraded(path, read_json(path))   # schema version 2, whatever version the file has

common.result's loaders call it once: nothing else reads an older name, and nothing on disk is
rewritten. Version 1 named samples images (images_per_second[_median|_per_device],
joules_per_image) and its units_per_second was the median step's; it kept the workload's
options in `config` too, the precision and torchvision's version twice, and before workloads
had none (the image workload, its options in `config`). The original single-file scripts'
flat results (no schema_version) ran the image workload as ORIGINAL_CONFIG says. What an older
file lacks is made here from what it recorded: a workload, J per unit, the GPU's busy share of
the timed step (from its profiled window), the run's host time (its ranks' mean). No torch, and
nothing of common.result: its models validate what this returns.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from common import workloads
from common.errors import ResultError, one_line

VERSION = 2  # common.result.SCHEMA_VERSION
UNIT_LABELS = {"images": "img", "tokens": "tok"}  # a version-1 workload's unit -> its label
# The original scripts had none of these options: they always ran like this (their README).
ORIGINAL_CONFIG: dict[str, Any] = {
    "workload": "image", "accelerator": "gpu", "compile": False, "compile_mode": None,
    "cudnn_benchmark": True, "sgd_impl": "auto", "bucket_cap_mb": 25.0,
    "gradient_as_bucket_view": True, "static_graph": False, "broadcast_buffers": True,
}  # fmt: skip
ORIGINAL_IMAGE_OPTIONS = {"num_classes": 1000, "channels_last": False}


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


def from_original(data: dict[str, Any]) -> dict[str, Any]:
    """An original script's flat result in this version's names."""
    out = {k: v for k, v in data.items() if not k.startswith(("images_", "precision_"))}
    model = data.get("model")
    arch = model.rsplit(".", 1)[-1] if isinstance(model, str) else None
    match = re.search(r"\d+x(\d+)x(\d+)", str(data.get("data")))  # "... 3x224x224 images ..."
    size = None if match is None else f"{match.group(1)}x{match.group(2)}"
    options = {"arch": arch, "image_size": _side(size), **ORIGINAL_IMAGE_OPTIONS}
    return {
        **out,
        "schema_version": VERSION,
        # the original Lightning script adds lightning_version; the native one does not
        "implementation": "lightning" if data.get("lightning_version") else "native",
        "samples_per_second": data.get("images_per_second"),
        "precision": {k: data.get(f"precision_{k}") for k in ("requested", "resolved")},
        "config": dict(ORIGINAL_CONFIG),
        "workload": _image(arch, options),
    }


def from_version_1(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 result (of separate runs, or interleaved) in this version's names."""
    data = copy.deepcopy(data)  # its parts are changed here, never the caller's
    out = {k.replace("images_", "samples_"): v for k, v in data.items()}
    out.update(schema_version=VERSION)
    out.pop("torchvision_version", None)  # environment.torchvision_version keeps it
    precision = out.get("precision")
    for name in ("requested", "resolved"):  # the precision once: its copies must agree
        flat, kept = out.pop(f"precision_{name}", None), _get(precision, name)
        if None not in (flat, kept) and flat != kept:
            raise ResultError(
                f"{path}: field precision_{name} {one_line(repr(flat))[:40]} disagrees with"
                f" precision.{name} {one_line(repr(kept))[:40]}; one of them is not the run's"
            )
    config, trained = out.get("config"), out.get("workload")
    if isinstance(config, dict):
        if trained is None:  # older than workloads: the image workload, its options in config
            names = workloads.option_names(workloads.resolve("image"))
            trained = _image(config.get("arch"), {k: config[k] for k in names if k in config})
        options = _get(trained, "options")
        names = set(options) if isinstance(options, dict) else set()
        out["config"] = {k: v for k, v in config.items() if k not in names}
    if isinstance(trained, dict) and "unit_label" not in trained:
        trained = {
            **trained,
            "unit_label": UNIT_LABELS.get(trained.get("unit"), trained.get("unit")),
        }
    out["workload"] = trained
    if out.get("kind") is None:  # a result of separate runs
        _throughput_and_energy(out, _times(_get(trained, "units_per_sample"), 1))
        _busy_share(out)
        each = [_times(_get(r, "host_ms_per_step"), 1) for r in _list(out.get("ranks"))]
        if out.get("host_ms_per_step") is None and each and None not in each:
            out["host_ms_per_step"] = sum(each) / len(each)  # type: ignore[arg-type]
    return out


def _image(title: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What a result records of the image workload (common.workloads.info's fields)."""
    return {
        "name": "image", "title": title, "unit": "images", "unit_label": "img", "sample": "image",
        "units_per_sample": 1, "options": options, "flops_per_sample": None,
    }  # fmt: skip


def _side(size: str | None) -> int | str | None:
    """'224x224' -> 224; images that are not square keep both sides."""
    height, _, width = (size or "").partition("x")
    return int(height) if size and height == width else size


def _list(value: Any) -> list[Any]:
    """A list read from a file, else none: validation names what is wrong."""
    return value if isinstance(value, list) else []


def _get(value: Any, key: str) -> Any:
    """value[key] of a dict read from a file, else None: validation names what is wrong."""
    return value.get(key) if isinstance(value, dict) else None


def _throughput_and_energy(out: dict[str, Any], units: float | None) -> None:
    """Units per second over the wall clock, from the median step (version 1's units_per_second)
    and per device; J per sample by its name, and per unit where a result had none."""
    median = out.pop("units_per_second", None)
    if units is not None:
        if median is None:
            median = _times(out.get("samples_per_second_median"), units)
        out["units_per_second_median"] = median
        out["units_per_second"] = _times(out.get("samples_per_second"), units)
        if out.get("units_per_second_per_device") is None:
            per_device = _times(out.get("samples_per_second_per_device"), units)
            out["units_per_second_per_device"] = per_device
    energy = out.get("energy")
    for part in [energy, *(_get(r, "telemetry") for r in _list(out.get("ranks")))]:
        if isinstance(part, dict) and "joules_per_image" in part:
            part["joules_per_sample"] = part.pop("joules_per_image")
    if isinstance(energy, dict) and energy.get("joules_per_unit") is None and units:
        energy["joules_per_unit"] = _times(energy.get("joules_per_sample"), 1 / units)


def _times(value: Any, factor: float) -> float | None:
    """value x factor where value is a number read from a file (a boolean is none), else None."""
    return (
        value * factor if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    )


def _busy_share(out: dict[str, Any]) -> None:
    """The GPU's busy share of the timed step where an older result has only its profiled
    window's busy fraction: its kernel time over the median timed step, at most 1
    (common.result.timed_share); unknown for older traced results whose kernel time exceeds
    the wall time (they counted annotated ranges as GPU work)."""
    activity = out.get("gpu_activity")
    if not isinstance(activity, dict) or activity.get("gpu_busy_share_of_timed_step") is not None:
        return
    keys = ("gpu_busy_fraction", "wall_ms_per_step", "gpu_ms_per_step")
    fraction, wall, kernels = (_times(activity.get(k), 1) for k in keys)
    median = _times(_get(out.get("step_time_ms"), "median"), 1)
    if None in (fraction, wall, kernels, median) or kernels > wall:  # type: ignore[operator]
        return
    share = min(fraction * wall / median, 1.0) if median > 0 else 0.0  # type: ignore[operator]
    out["gpu_activity"] = {**activity, "gpu_busy_share_of_timed_step": share}
