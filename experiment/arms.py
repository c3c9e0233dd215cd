"""The arms an experiment can run, their labels and how each is started."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from common.errors import UsageError

# runner -> (module, options the runner itself adds).
ARMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "native": ("native", ()),
    "fabric": ("lightning_impl.fabric", ()),
    "lightning": ("lightning_impl", ()),
    "lightning-services": ("lightning_impl", ("--no-barebones",)),
}
DEFAULT_ARMS = ("native", "lightning")


@dataclass(frozen=True)
class Arm:
    """One arm of an experiment: a label, the runner it starts, extra options for it alone."""

    label: str
    runner: str  # a key of ARMS
    options: tuple[str, ...] = ()

    @property
    def argv(self) -> list[str]:
        """The runner's arguments after the interpreter, before the shared options."""
        module, own = ARMS[self.runner]
        return ["-m", module, *own, *self.options]


def available(runner: str) -> bool:
    """True when the runner's module is present (and Lightning, for Lightning's); no import."""
    module = ARMS[runner][0]
    top = module.split(".")[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return False
    if "." in module:
        folder = Path(next(iter(spec.submodule_search_locations)))
        if not (folder / f"{module.split('.')[-1]}.py").is_file():
            return False
    return top != "lightning_impl" or importlib.util.find_spec("lightning") is not None


def label_arms(names: list[str]) -> list[Arm]:
    """Arms for names; a name listed again gets -b, -c, ... (A/A: native, native-b)."""
    seen: dict[str, int] = {}
    arms = []
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        label = name if count == 0 else f"{name}-{chr(ord('a') + count)}"
        arms.append(Arm(label, name))
    return arms


def parse_arms(text: str) -> list[Arm]:
    """--arms: comma-separated names, or `all`; raises UsageError with the one-line reason."""
    if text == "all":
        names = [a for a in ARMS if available(a)]
    else:
        names = [n.strip() for n in text.split(",")]
        for name in names:
            if name not in ARMS:
                raise UsageError(
                    f"--arms: unknown arm '{name}'; choose from {', '.join(ARMS)} or all"
                )
            if not available(name):
                raise UsageError(
                    f"--arms: arm '{name}' is not available here"
                    f" (module {ARMS[name][0]} or Lightning missing)"
                )
    if len(names) < 2:
        raise UsageError(
            "--arms needs at least two arms (the baseline first), e.g. native,lightning"
        )
    return label_arms(names)
