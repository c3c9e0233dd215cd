"""A workload of one's own (`--workload MODULE:NAME`), checked where it is resolved and
validated, before any process: each mistake one line naming --workload (exit 2), never a
traceback, a script's usage line or a run that fails after its steps.

    module = import_module(spec, "my_pkg.train", "workload")  # a file path, a script's exit
    options = checked(workload, spec, options, cfg)   # its check, then what a result records

Its options are checked as flags with the option machinery (common.config.check_declaration,
which names the interleaved mode's INTERLEAVED_OPTIONS); make_batch's batch once in each rank,
before the timed steps (common.training.make_batch); what fails in a rank is one line there
(common.report.rank_failed). Imports neither torch nor the rest of the suite.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import math
import numbers
import sys
from collections.abc import Callable
from pathlib import Path, PurePath
from types import ModuleType
from typing import Any

from common.errors import UsageError, one_line

# The interleaved mode's own options (lightning_impl/interleaved.py `Options`, which this
# package may not import: Lightning is optional): it parses them before the runners' options,
# so a workload option of one of these names would be taken by the mode
# (tests/test_workload_declarations.py pins the list to the mode's fields).
INTERLEAVED_OPTIONS = (
    "baseline",
    "arm",
    "chunk_steps",
    "pairing",
    "pairs",
    "runs",
    "warmup_pairs",
    "build_first",
    "order_seed",
)
EXAMPLE_FILE = "examples/custom_workload.py"


def import_module(spec: str, module_name: str, name: str) -> ModuleType:
    """MODULE of --workload MODULE:NAME, imported; UsageError, one line naming --workload, for a
    file path (the dotted name is advised), a module that cannot be found or fails to import,
    and one that ends the program while it is imported (a training script parsing its own
    arguments, or calling sys.exit): what it printed meanwhile is kept back, and its last line
    quoted. A module that imports cleanly has its output passed on as it was."""
    if "/" in module_name or "\\" in module_name:
        raise UsageError(f"--workload {spec}: {_dotted_advice(module_name, name)}")
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            module = importlib.import_module(module_name)
    except SystemExit as stop:
        said = (err.getvalue() or out.getvalue()).strip().splitlines()
        status = "" if stop.code is None else f" {stop.code}"
        quoted = f": {said[-1][:160]!r}" if said else ""
        raise UsageError(
            f"--workload {spec}: importing {module_name} ended the program (SystemExit{status}"
            f"{quoted}); it looks like a script: keep its work under"
            " `if __name__ == '__main__':` and declare a common.workloads.Workload at its top"
            f" level (see {EXAMPLE_FILE})"
        ) from None
    except ModuleNotFoundError as error:
        if module_name.endswith(".py"):  # a file's name, not a module's (pkg.py would be one)
            raise UsageError(f"--workload {spec}: {_dotted_advice(module_name, name)}") from None
        if error.name == module_name or module_name.startswith(f"{error.name}."):
            raise UsageError(
                f"--workload {spec}: no module {module_name!r} can be imported from here;"
                " run from the folder that holds it or add it to PYTHONPATH"
            ) from None
        raise UsageError(f"--workload {spec}: importing {module_name} failed: {error}") from None
    except Exception as error:  # the module's own mistake, or a name no module can have
        why = f"{type(error).__name__}: {error}"
        raise UsageError(f"--workload {spec}: importing {module_name} failed: {why}") from None
    sys.stdout.write(out.getvalue())
    sys.stderr.write(err.getvalue())
    return module


def _dotted_advice(path: str, name: str) -> str:
    """What to give instead of a file path: the module's dotted name."""
    pieces = PurePath(path.removesuffix(".py")).parts
    dotted = ".".join(p for p in pieces if p not in (".", ""))
    absolute = PurePath(path).is_absolute() or ".." in pieces
    if not absolute and dotted and all(p.isidentifier() for p in dotted.split(".")):
        return (
            f"{path!r} is a file path; give the module's dotted name: --workload {dotted}:{name}"
            f" (importable from the current folder, or with its folder on PYTHONPATH)"
        )
    return (
        f"{path!r} is a file path; give the module's dotted name, importable from the current"
        f" folder or PYTHONPATH (e.g. {EXAMPLE_FILE} is examples.custom_workload)"
    )


def module_digest(module: ModuleType) -> str | None:
    """sha256 of the module's file, which the suite's source digest does not cover; None for
    a module without one (a namespace package)."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    try:
        return hashlib.sha256(Path(file).read_bytes()).hexdigest()
    except OSError:
        return None


def error_line(error: BaseException) -> str:
    """An exception as one short line."""
    return one_line(f"{type(error).__name__}: {error}")[:300]


def checked(wl: Any, spec: str, options: Any, cfg: Any) -> Any:
    """The workload `wl`'s own `check` (UsageError as it raised it; any other error one line naming
    --workload), whose answer must be its options; then what a result records of the
    workload, computed now (units_per_sample a whole number from 1, flops_per_sample None or
    finite and positive, describe/data/title and the unit's labels text), so that no declared
    number fails after the run. Returns the options to run with."""
    where = f"--workload {spec}"
    found = _call(where, "check", wl.check, options, cfg)
    if not isinstance(found, wl.options):
        raise UsageError(
            f"{where}: its check returned a {type(found).__name__}, not its options"
            f" ({wl.options.__name__}); return the options to run with"
        )
    units = _call(where, "units_per_sample", wl.units_per_sample, found)
    if isinstance(units, bool) or not isinstance(units, numbers.Integral) or not 1 <= units:
        raise UsageError(
            f"{where}: its units_per_sample is {units!r}; it must be a whole number from 1"
            f" (the {wl.unit} in one {wl.sample})"
        )
    flops = _call(where, "flops_per_sample", wl.flops_per_sample, found)
    if flops is not None and (
        isinstance(flops, bool)
        or not isinstance(flops, numbers.Real)
        or not (math.isfinite(flops) and flops > 0)
    ):
        raise UsageError(
            f"{where}: its flops_per_sample is {flops!r}; it must be a finite positive number,"
            " or None where unknown (MFU is then shown as '-')"
        )
    where_run = "GPU" if cfg.accelerator == "gpu" else "CPU"
    for name, call, args in (
        ("describe", wl.describe, (found,)),
        ("data", wl.data, (found, where_run)),
        ("title", wl.title, (found,)),
    ):
        text = _call(where, name, call, *args)
        if not isinstance(text, str):
            raise UsageError(f"{where}: its {name} returned a {type(text).__name__}, not text")
    for name in ("unit", "unit_label", "sample"):  # the report's labels
        if not isinstance(getattr(wl, name), str):
            raise UsageError(
                f"{where}: its {name} is a {type(getattr(wl, name)).__name__}, not text"
            )
    return found


def _call(where: str, name: str, call: Callable[..., Any], *args: Any) -> Any:
    """call(*args), a UsageError passed on, any other error one line naming the function."""
    try:
        return call(*args)
    except UsageError:
        raise
    except Exception as error:
        raise UsageError(f"{where}: its {name} failed: {error_line(error)}") from None
