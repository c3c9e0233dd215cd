"""Every arm declared once: what it runs, the responsibility it isolates, the arm it is compared
with (its parent), and its part in the decomposition of Lightning's cost.

    ARMS["fabric-torch-autocast"].options        # ('--ablation', 'torch-autocast')
    arm_of("fabric", {"ablation": "raw-step"})  # 'fabric-raw-step': the name a result records
    check_settings("native", {"ablation": "raw-step"}, "bf16")   # UsageError: not native's

The runners (their --ablation), experiment (--arms, the plans), the result schema (`arm`),
compare (its order of arms, the comparisons it states, "Where the cost comes from") and the
lesson page all read this table: adding an arm is one row. An ablation arm is one runner with
one change that hands one responsibility back to native's way ("removes": its parent does it
Lightning's way) or across to native ("adds": native does it Lightning's way), keeping the
numerics exact: one row here and one `Hooks` class, the change, where its runner lives
(native's in common/training.py, Lightning's in lightning_impl/ablations.py). No torch, no
Lightning: compare reads it on any laptop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from common.errors import UsageError

# implementation (a result's `implementation`) -> the module that runs it
RUNNERS = {"native": "native", "fabric": "lightning_impl.fabric", "lightning": "lightning_impl"}
# The stream each runner builds its DDP wrapper on (DDPStrategy: a side stream); --ddp-stream
# with this value changes nothing.
NATURAL_STREAM = {"native": "current", "fabric": "side", "lightning": "side"}
# The BenchConfig fields an arm may set, and the value that sets nothing.
NEUTRAL: dict[str, object] = {"ablation": None, "ddp_stream": "auto", "barebones": True}


@dataclass(frozen=True)
class Responsibility:
    """A responsibility Lightning takes over: its key, its title in a report, and the
    `# DDP:` marks (the lesson's rows) where the runners hand it over."""

    key: str
    title: str
    marks: tuple[str, ...]


RESPONSIBILITIES = (
    Responsibility("launch", "launch and process group", ("process launch", "process group")),
    Responsibility("wrapper", "DDP wrapper and its stream", ("device placement", "model wrapper")),
    Responsibility("precision", "mixed precision", ("mixed precision",)),
    Responsibility("step", "backward and step wrappers", ("backward and optimizer step",)),
    # the Trainer's automatic optimisation: its mark in the lesson is the backward and step's
    Responsibility("loop", "the Trainer's loop", ("backward and optimizer step",)),
    Responsibility("services", "the Trainer's services", ()),
)
RESPONSIBILITY = {r.key: r for r in RESPONSIBILITIES}

# main: a runner as it is (native, Fabric, the Trainer, its services); part: the ablation
# that measures its responsibility, stated against its parent and summed in the decomposition;
# detail: a piece of a responsibility measured whole elsewhere, stated against its parent and
# shown beside it, not summed; check: another view of a responsibility, stated against the
# baseline like any arm outside a decomposition (the ddp-stream-swap plan's question).
Role = Literal["main", "part", "detail", "check"]


@dataclass(frozen=True)
class Arm:
    """One row of the table."""

    name: str  # the label a plan gives it and the `arm` its results record
    runner: str  # a key of RUNNERS
    settings: tuple[tuple[str, object], ...]  # the BenchConfig fields it sets (NEUTRAL's keys)
    parent: str | None  # the arm it is compared with
    responsibility: str | None  # a key of RESPONSIBILITY (None: several, or none)
    role: Role
    adds: bool  # True: it does the responsibility Lightning's way and its parent does not
    change: str  # what it changes, in one line
    one_rank: str | None = None  # why it isolates nothing with one rank (plans leave it out)
    fp16: str | None = None  # why it cannot keep the numerics at fp16 (refused there)

    @property
    def options(self) -> tuple[str, ...]:
        """The runner's command-line options that make this arm."""
        flags: list[str] = []
        for name, value in self.settings:
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                flags.append(flag if value else "--no-" + flag[2:])
            else:
                flags += [flag, str(value)]
        return tuple(flags)

    @property
    def ablation(self) -> bool:
        """True for an ablation arm (not a runner as it is)."""
        return self.role != "main"

    @property
    def module(self) -> str:
        """The module that runs it."""
        return RUNNERS[self.runner]


def _ablation(name: str) -> tuple[tuple[str, object], ...]:
    """The settings of `--ablation name`."""
    return (("ablation", name),)


TABLE: tuple[Arm, ...] = (
    Arm("native", "native", (), None, None, "main", True,
        "every DDP responsibility written out by hand"),
    Arm("fabric", "fabric", (), "native", None, "main", True,
        "launch, process group, device, DDP wrapper, precision and backward handed to Fabric;"
        " the loop stays native's"),
    Arm("lightning", "lightning", (), "fabric", "loop", "main", True,
        "also the loop handed to Trainer(barebones=True): hooks, closure, the per-step SIGTERM"
        " broadcast"),
    Arm("lightning-services", "lightning", (("barebones", False),), "lightning", "services",
        "main", True,
        "the Trainer's services on: progress bar, model summary, CSV logging every step,"
        " a checkpoint at the end"),
    Arm("fabric-native-launch", "fabric", _ablation("native-launch"), "fabric", "launch",
        "part", False,
        "native's launcher and init_process_group make the ranks and the group; Fabric adopts"
        " them",
        one_rank="one rank starts no other process and its process group is made once, before"
        " the timed steps (DDP's all-reduce runs in it either way): no per-step work to remove"),
    Arm("fabric-current-stream", "fabric", (("ddp_stream", "current"),), "fabric", "wrapper",
        "part", False,
        "DDPStrategy builds the DDP wrapper on the current stream, as native does, not on a side"
        " stream"),
    Arm("fabric-torch-autocast", "fabric", _ablation("torch-autocast"), "fabric", "precision",
        "part", False,
        "Fabric at 32-true with native's torch.autocast around forward and loss: no precision"
        " plugin, no input or output casts",
        fp16="at fp16 it would also drop Fabric's gradient scaler"),
    Arm("fabric-raw-step", "fabric", _ablation("raw-step"), "fabric", "step", "part", False,
        "DDP's module called under Fabric's precision context and casts, loss.backward() and the"
        " optimizer's own step: no _FabricModule, fabric.backward or _FabricOptimizer",
        fp16="at fp16 Fabric's backward and step carry the gradient scaler"),
    Arm("lightning-no-sigterm", "lightning", _ablation("no-sigterm"), "lightning", "loop",
        "detail", False,
        "the Trainer's loop without its per-step SIGTERM flag broadcast and .item()",
        one_rank="with one rank the Trainer broadcasts no SIGTERM flag (its loop does so only"
        " when the world size is above 1; Lightning 2.5.2 to 2.6.6)"),
    Arm("native-fp32-logits", "native", _ablation("fp32-logits"), "native", "precision",
        "detail", True,
        "native casts the model's output to fp32 after the forward, as Fabric's convert_output"
        " does"),
    Arm("native-side-stream", "native", (("ddp_stream", "side"),), "native", "wrapper",
        "detail", True,
        "native builds its DDP wrapper on a side stream, as DDPStrategy does"),
    Arm("lightning-current-stream", "lightning", (("ddp_stream", "current"),), "lightning",
        "wrapper", "check", False,
        "the Trainer's DDPStrategy builds the wrapper on the current stream, as native does"),
)  # fmt: skip
ARMS = {arm.name: arm for arm in TABLE}
MAIN = tuple(arm.name for arm in TABLE if not arm.ablation)  # `--arms all`
# --ablation's values: each names one change of one runner
ABLATIONS = {str(value): arm for arm in TABLE for name, value in arm.settings if name == "ablation"}


class Hooks:
    """What an arm changes in its runner, at the points where the runners call it. This base
    changes nothing: a runner as it is, or an arm made by an option every runner reads
    (--no-barebones, --ddp-stream). Each --ablation's arm is a subclass naming it (`arm`), one
    per row, registered in HOOKS when its module is imported (a second, or an unknown name, is
    refused); its runner calls `hooks(cfg.ablation)`."""

    arm: ClassVar[str] = ""  # the row of TABLE whose --ablation this is

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        row = ARMS.get(cls.arm)
        if row is None or dict(row.settings).get("ablation") is None:
            raise TypeError(f"{cls.__name__}.arm {cls.arm!r} is no --ablation row of the table")
        if cls.arm in HOOKS:
            raise TypeError(f"{cls.__name__}: the arm {cls.arm} has hooks already")
        HOOKS[cls.arm] = cls()

    def workload(self, wl: Any) -> Any:
        """The workload the runner trains (common.training.declared): `wl` as declared."""
        return wl

    def precision(self, plugin: dict[str, object]) -> dict[str, object]:
        """Fabric's precision keyword arguments: `plugin`, Lightning's for the precision."""
        return plugin

    def starts_ranks(self) -> bool:
        """True: native's launcher starts the ranks of a plain start of several."""
        return False

    def before_launch(self, cfg: Any, launch: Any, fabric: Any, prec: Any) -> None:
        """What changes on this run's Fabric before fabric.launch(): nothing."""

    def sigterm_broadcasts(self) -> int | None:
        """The Trainer loop's SIGTERM broadcasts a step (None: as Lightning makes them)."""
        return None


# --ablation's arm name -> its hooks (registered by each subclass of Hooks)
HOOKS: dict[str, Hooks] = {}
NO_CHANGE = Hooks()


def hooks(ablation: str | None) -> Hooks:
    """The hooks of --ablation's arm (None: NO_CHANGE); the runner's module registered them."""
    if ablation is None:
        return NO_CHANGE
    arm = ABLATIONS[ablation].name  # the parser allows only these
    if arm not in HOOKS:
        raise RuntimeError(f"no hooks for the arm {arm}: import {ABLATIONS[ablation].module}")
    return HOOKS[arm]


def effective(runner: str, values: Mapping[str, object]) -> dict[str, object]:
    """The arm settings a run's options make (NEUTRAL's fields), those that change nothing
    left out: --ddp-stream naming the runner's own stream is no change."""
    found = {}
    for name, neutral in NEUTRAL.items():
        value = values.get(name, neutral)
        if value == neutral or (name == "ddp_stream" and value == NATURAL_STREAM[runner]):
            continue
        found[name] = value
    return found


def arm_of(runner: str, values: Mapping[str, object]) -> str | None:
    """The arm a run of `runner` with these options is (None: a combination no row declares)."""
    settings = effective(runner, values)
    for arm in TABLE:
        if arm.runner == runner and dict(arm.settings) == settings:
            return arm.name
    return None


def check_settings(
    runner: str | None,
    values: Mapping[str, object],
    precision: str | None = None,
    world_size: int | None = None,
) -> None:
    """UsageError (one line) for an --ablation that is not this runner's (None: a program that
    runs no arm), one combined with another arm's change, one that cannot keep the numerics at
    the resolved `precision`, or one that isolates nothing at `world_size` 1 (either None: not
    resolved yet, not checked)."""
    ablation = values.get("ablation")
    if ablation is None:
        return
    arm = ABLATIONS[str(ablation)]  # the parser allows only these
    if runner != arm.runner:
        mine = [a for a, row in ABLATIONS.items() if row.runner == runner]
        takes = f"this program takes {', '.join(mine)}" if mine else "this program takes none"
        raise UsageError(
            f"--ablation {ablation} changes python -m {arm.module} (the arm {arm.name});"
            f" {takes}: leave it out or run {arm.module}"
        )
    others = [n for n in effective(arm.runner, values) if n != "ablation"]
    if others:
        flag = "--no-barebones" if others[0] == "barebones" else "--ddp-stream"
        raise UsageError(
            f"--ablation {ablation} with {flag}: an arm hands back one responsibility at a time;"
            f" leave one of them out"
        )
    if precision == "fp16" and arm.fp16:
        raise UsageError(
            f"--ablation {ablation} keeps the numerics at fp32, tf32 and bf16 only ({arm.fp16});"
            " use --precision bf16"
        )
    if world_size == 1 and arm.one_rank is not None:
        raise UsageError(
            f"--ablation {ablation} isolates nothing with one rank ({arm.one_rank});"
            " give it 2 or more (--devices 2)"
        )


def ablation_help() -> str:
    """--ablation's help: each value, its runner and what it changes."""
    return "; ".join(f"{value} ({arm.runner}: {arm.change})" for value, arm in ABLATIONS.items())
