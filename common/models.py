"""torchvision's classification models by name, read from its sources: no torch import.

    classification_models()     # {"resnet50": "resnet", "vit_b_16": "vision_transformer", ...}

torchvision registers each builder with `@register_model()` in torchvision/models/<family>.py,
and `torchvision.models.list_models(module=torchvision.models)` lists those of the family files.
Importing torchvision to ask costs seconds: it imports torch, and torchvision.ops imports
torch._dynamo. The parent of a self-launched run and `--check` only validate --arch, so they
read the same registrations from the source files (a few milliseconds); where the sources
cannot be read (a zipped or compiled-only install) they ask torchvision itself.
tests/test_workload.py pins that both answers agree for the installed torchvision.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

# `@register_model()` or `@register_model(name="x")`, other decorators and their continuation
# lines, then `def builder(`.
_REGISTERED = re.compile(
    r"^@register_model\((?:name\s*=\s*)?(?:[\"'](\w+)[\"'])?\s*\)\s*\n"
    r"(?:@.*\n|\s+.*\n)*?def (\w+)",
    re.M,
)


@functools.cache
def classification_models() -> dict[str, str]:
    """{model name: family module under torchvision.models} of every classification model."""
    spec = importlib.util.find_spec("torchvision")
    found: dict[str, str] = {}
    if spec is not None and spec.origin is not None:
        for path in sorted((Path(spec.origin).parent / "models").glob("*.py")):
            for match in _REGISTERED.finditer(path.read_text(encoding="utf-8")):
                found[match[1] or match[2]] = path.stem
    return found or _asked_of_torchvision()


def _asked_of_torchvision() -> dict[str, str]:
    """The same from torchvision itself (slow: imports torch)."""
    import torchvision

    models = torchvision.models
    return {
        name: models.get_model_builder(name).__module__.rsplit(".", 1)[1]
        for name in models.list_models(module=models)
    }
