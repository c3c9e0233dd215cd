"""What each torchvision architecture trains on, by its forward pass on the meta device: the
truth `tests/test_hostile.py` checks the parser's architecture rules against.

    PYTHONPATH=$PWD python tests/architectures.py --record   # tests/data/architectures/

The answer is a pure function of the installed torchvision (its models) and torch (their
shapes): for each classification model and each probe (images per device x image size),
whether one training forward pass returns the logits. Deriving it builds every model (about
80) on the meta device, each once, and runs its 22 probes: minutes on two cores. So it is
committed per torchvision version, `tests/data/architectures/torchvision-<version>.json`, and
the parser is checked against the committed table on every run; the derivation runs only where
the installed torchvision has no table, and under `make test-exhaustive` (marker `exhaustive`),
which also checks that the committed table is still what the derivation gives. Record a table
for a new torchvision with `--record` and commit it.
"""

from __future__ import annotations

import json
import sys
import warnings
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLES = ROOT / "tests" / "data" / "architectures"
BATCHES = (1, 2)  # images per device
SIZES = (31, 32, 33, 62, 63, 64, 65, 96, 223, 224, 225)  # around every bound the parser knows
# {arch: {batch: [sizes it trains on]}}; None: the model cannot be built on the meta device
Table = dict[str, "dict[int, list[int]] | None"]


def torchvision_version() -> str:
    """The installed torchvision's public version (no local part: +cpu and +cu130 builds share
    their models), read from its metadata: no import."""
    return metadata.version("torchvision").split("+", 1)[0]


def table_path(version: str | None = None) -> Path:
    """Where the table of a torchvision version is committed."""
    return TABLES / f"torchvision-{version or torchvision_version()}.json"


def committed(version: str | None = None) -> Table | None:
    """The committed table of the installed torchvision (or `version`); None when there is
    none."""
    path = table_path(version)
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    return {
        arch: None if row is None else {int(batch): sizes for batch, sizes in row.items()}
        for arch, row in doc["architectures"].items()
    }


def derive_one(arch: str) -> dict[int, list[int]] | None:
    """One model, built once on the meta device (no memory), and every probe's forward pass
    in training mode: {batch: [sizes that return the logits]}; None where it cannot be built."""
    import torch
    import torchvision

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchvision's FutureWarnings about GoogLeNet's init
        try:
            with torch.device("meta"):
                model = torchvision.models.get_model(arch, weights=None, num_classes=10)
        except NotImplementedError:  # RegNet computes its widths with .tolist()
            return None
        model.train()
        found: dict[int, list[int]] = {}
        for batch in BATCHES:
            found[batch] = []
            for size in SIZES:
                try:
                    with torch.no_grad():
                        out = model(torch.empty(batch, 3, size, size, device="meta"))
                except (RuntimeError, ValueError, AssertionError):
                    continue
                if isinstance(out, torch.Tensor):  # not GoogLeNet's or Inception's tuples
                    found[batch].append(size)
    return found


def derive(archs: list[str] | None = None) -> Table:
    """The table for the installed torchvision (every classification model, or `archs`)."""
    from common.models import classification_models

    return {arch: derive_one(arch) for arch in sorted(archs or classification_models())}


def record() -> Path:
    """Derive the installed torchvision's table and write it; its path."""
    import torch

    table = derive()
    head = {
        "about": "tests/architectures.py --record: per architecture and images per device, the"
        " image sizes its training forward pass takes on the meta device (null: not buildable)",
        "torchvision": torchvision_version(),
        "torch": torch.__version__.split("+", 1)[0],
        "batches": list(BATCHES),
        "sizes": list(SIZES),
    }
    rows = [
        f"    {json.dumps(arch)}: "
        + json.dumps(None if row is None else {str(b): s for b, s in row.items()})
        for arch, row in table.items()
    ]
    text = "{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items())
    path = table_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + '  "architectures": {\n' + ",\n".join(rows) + "\n  }\n}\n")
    return path


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit(f"usage: {sys.argv[0]} --record")
    print(record())
