"""A workload, declared once: the model, each rank's batch, the loss and what a step counts.

    wl = resolve("gpt")          # "image" (the default), "gpt", or "MODULE:NAME" of your own
    opts = cfg.workload_options  # its options, parsed and checked by common.config
    model = wl.build_model(opts)                        # on the CPU; common.training seeds first
    batch = wl.make_batch(opts, 8, generator, device)   # Batch(inputs, targets), on the device
    loss = wl.loss(model(batch.inputs), batch.targets)

A `Workload` is what torchtitan's `TrainSpec` is to its trainer and `load_train_objs()` to the
DDP tutorial: the one place that says what is trained. The runners, the interleaved mode, the
result and compare read only this declaration, so the runner files name no model and adding a
workload is one new file (examples/custom_workload.py is one, with its own option).

This package imports no torch: the parser and the parent of a self-launched run read the
declarations (their options) without it. A declaration's functions import torch when called.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from common.errors import UsageError
from common.workloads import checks

DEFAULT = "image"
# The workloads of this suite by --workload name: each module's `workload`
BUILTIN = {"image": "common.workloads.image", "gpt": "common.workloads.gpt"}
EXAMPLE = "examples.custom_workload:workload"


class Batch(NamedTuple):
    """One rank's batch: what the model takes and what the loss compares its output with."""

    inputs: Any  # torch.Tensor
    targets: Any  # torch.Tensor


@dataclass(frozen=True)
class NoOptions:
    """The options of a workload that has none."""


def _one(options: Any) -> int:
    """One unit of work per sample (an image is one image)."""
    return 1


def _unknown(options: Any) -> float | None:
    """FLOPs per sample not known: MFU is shown as '-'."""
    return None


def _as_given(options: Any, cfg: Any) -> Any:
    """Options need no check beyond their bounds."""
    return options


@dataclass(frozen=True)
class Workload:
    """What is trained and what a step counts, for every runner alike.

    The callables take the workload's options (an instance of `options`, a frozen dataclass
    whose fields are declared with `common.option_fields.option()`: each is a command-line flag).
    Results name a workload as --workload did (image, gpt, MODULE:NAME)."""

    unit: str  # what throughput counts, plural: images, tokens
    sample: str  # one sample of a batch: image, sequence (a batch size counts these)
    build_model: Callable[[Any], Any]  # options -> torch.nn.Module on the CPU (seeded before)
    # (options, samples, torch.Generator, device) -> Batch, made on the device from the generator
    make_batch: Callable[[Any, int, Any, Any], Batch]
    loss: Callable[[Any, Any], Any]  # (model output, targets) -> scalar tensor
    describe: Callable[[Any], str]  # the model, for a result's `model` field
    data: Callable[[Any, str], str]  # (options, "GPU" or "CPU") -> the data, for `data`
    title: Callable[[Any], str]  # a few characters for a report's first line: resnet50, ...
    options: type = NoOptions
    units_per_sample: Callable[[Any], int] = _one
    flops_per_sample: Callable[[Any], float | None] = _unknown  # model FLOPs, for MFU
    # (options, BenchConfig) -> the options to run with (e.g. a preset's sizes filled in), or
    # UsageError naming the flag; called after every option's bounds were checked
    check: Callable[[Any, Any], Any] = _as_given
    # the modules its functions import when called (its torch side): a runner imports a
    # built-in workload's ahead (import_built_in), so that a fork server holds them
    imports: tuple[str, ...] = ()
    # the unit's short label, as a column header names it (img/s, tok/s); "": the unit itself
    unit_label: str = ""


def import_built_in() -> None:
    """Import every built-in workload and what its functions import when called."""
    for spec in BUILTIN:
        for module in resolve(spec).imports:
            importlib.import_module(module)


def option_names(wl: Workload) -> list[str]:
    """The workload's option fields, in declaration order (each is a flag: common.config)."""
    return [f.name for f in dataclasses.fields(wl.options)]


@functools.cache
def resolve(spec: str) -> Workload:
    """The workload `--workload spec` names: a built-in, or NAME in the importable MODULE of
    MODULE:NAME (common.workloads.checks imports it); UsageError (one line naming --workload
    and the fix) when there is none."""
    if spec in BUILTIN:
        return importlib.import_module(BUILTIN[spec]).workload
    module_name, colon, name = spec.partition(":")
    if not colon:
        raise UsageError(
            f"--workload {spec!r} is not a workload; use {', '.join(BUILTIN)}"
            f" or MODULE:NAME (e.g. {EXAMPLE})"
        )
    module = checks.import_module(spec, module_name, name)
    found = getattr(module, name, None) if name.isidentifier() else None
    if found is None:
        raise UsageError(
            f"--workload {spec}: module {module_name} has no {name!r}; name a Workload"
            f" declared there (MODULE:NAME, e.g. {EXAMPLE})"
        )
    if not isinstance(found, Workload):
        raise UsageError(
            f"--workload {spec}: {module_name}.{name} is a {type(found).__name__}, not a"
            " common.workloads.Workload; declare one (see examples/custom_workload.py)"
        )
    if not (dataclasses.is_dataclass(found.options) and isinstance(found.options, type)):
        raise UsageError(
            f"--workload {spec}: its options must be a dataclass declared with"
            " common.option_fields.option() (see examples/custom_workload.py)"
        )
    _DIGESTS[spec] = checks.module_digest(module)
    return found


# MODULE:NAME -> sha256 of MODULE's file as resolved (a result's workload.module_digest)
_DIGESTS: dict[str, str | None] = {}


def info(wl: Workload, spec: str, options: Any) -> dict[str, Any]:
    """What a result records of its workload (common.result.WorkloadInfo's fields)."""
    flops = wl.flops_per_sample(options)
    return {
        "name": spec,
        "title": wl.title(options),
        "unit": wl.unit,
        "unit_label": wl.unit_label or wl.unit,
        "sample": wl.sample,
        "units_per_sample": int(wl.units_per_sample(options)),
        "options": {k: _plain(v) for k, v in dataclasses.asdict(options).items()},
        "flops_per_sample": None if flops is None else float(flops),
        "module_digest": _DIGESTS.get(spec),
    }


def _plain(value: Any) -> Any:
    """A JSON value: numbers, strings, booleans and None as they are, anything else as text."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)
