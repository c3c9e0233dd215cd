"""The Lightning runners' ablations, all here: each hands one responsibility that Fabric or the
Trainer takes over back to native's way, and keeps the numerics (the arms table, common/arms.py).

    strategy = ddp_strategy_class(cfg, DDPStrategy)(...)   # --ddp-stream current
    precision_plugin(cfg, prec, device_type)               # --ablation torch-autocast: 32-true
    if launches_ranks(cfg, launch): launch_ranks(...)      # --ablation native-launch
    before_launch(cfg, launch, fabric, prec)               # native-launch, torch-autocast, raw-step
    sigterm_broadcasts(cfg, trainer)                       # --ablation no-sigterm

Each --ablation is one class here, the arms table's `Hooks` for its row (common/arms.py),
overriding the hook points it changes; the functions above ask `arms.hooks(cfg.ablation)`.
Lightning's public switches are used where they exist: precision="32-true", and a process group
made before Fabric's own is adopted (Fabric makes none when one exists). Where Lightning has no
switch, the change is made here and nowhere else, on one object of this run, and each such place
says MONKEYPATCH: a DDPStrategy subclass overriding its private wrapper method, and methods of
this run's Fabric and of the Trainer's loop replaced on the instance. native's own ablations
(fp32-logits, --ddp-stream side) are common.training's, which every runner builds from.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import torch
from torch.nn.parallel import DistributedDataParallel

from common import arms, launcher, precision, training
from common.config import BenchConfig
from common.environment import SIGTERM_BROADCASTS_VAR
from common.precision import Precision
from lightning_impl import workarounds

FABRIC_MODULE = "lightning_impl.fabric"


def ddp_strategy_class(cfg: BenchConfig, base: type) -> type:
    """`base` (a DDPStrategy), or with --ddp-stream current (fabric-current-stream,
    lightning-current-stream) a subclass that builds the wrapper on the current stream, as
    native does, instead of a side stream.

    MONKEYPATCH (a subclass): both Lightning DDPStrategy classes (2.6.6) wrap the model under
    torch.cuda.stream(torch.cuda.Stream()); the subclass leaves out only that, overriding the
    Trainer's private _setup_model or Fabric's setup_module. Everything else is Lightning's.
    """
    if training.ddp_stream(cfg, natural="side") != "current":
        return base
    if hasattr(base, "_setup_model"):  # lightning.pytorch

        class CurrentStreamDDPStrategy(base):
            def _setup_model(self, model: torch.nn.Module) -> DistributedDataParallel:
                return DistributedDataParallel(
                    module=model, device_ids=self.determine_ddp_device_ids(), **self._ddp_kwargs
                )
    else:  # lightning.fabric

        class CurrentStreamDDPStrategy(base):
            def setup_module(self, module: torch.nn.Module) -> DistributedDataParallel:
                return DistributedDataParallel(
                    module=module, device_ids=self._determine_ddp_device_ids(), **self._ddp_kwargs
                )

    return CurrentStreamDDPStrategy


def precision_plugin(cfg: BenchConfig, prec: Precision, device_type: str) -> dict[str, object]:
    """Fabric's precision keyword arguments (workarounds.fabric_precision), as --ablation's arm
    changes them (TorchAutocast)."""
    return arms.hooks(cfg.ablation).precision(workarounds.fabric_precision(prec, device_type))


def launches_ranks(cfg: BenchConfig, launch: launcher.Launch) -> bool:
    """Whether native's launcher starts this run's ranks (NativeLaunch): this process is the
    plain start of several."""
    return arms.hooks(cfg.ablation).starts_ranks() and launch.starts_ranks(cfg.world_size)


def launch_ranks(prog: str, argv: list[str], devices: int) -> int:
    """native's launcher (native/launch.py) starting this program's ranks; their exit status."""
    from native.launch import launch_ranks as native_launch_ranks

    return native_launch_ranks(prog, FABRIC_MODULE, argv, devices)


def before_launch(cfg: BenchConfig, launch: launcher.Launch, fabric, prec: Precision) -> None:
    """What --ablation's arm changes on this run's Fabric before fabric.launch()."""
    arms.hooks(cfg.ablation).before_launch(cfg, launch, fabric, prec)


def sigterm_broadcasts(cfg: BenchConfig, trainer) -> None:
    """The Trainer loop's per-step SIGTERM flag broadcast made N times a step: 0 with
    --ablation no-sigterm (NoSigterm); N with the test-only DDPBENCH_SIGTERM_BROADCASTS=N
    (a test shows host_ms_per_step counts it; the result lists the switch in
    environment.diagnostics). Neither (always, outside these): untouched.

    MONKEYPATCH: the loop (Lightning 2.5.2 to 2.6.6) calls self._broadcast_sigterm_tensor() at
    the start of every step when the world size is above 1; this replaces the method on that
    one object. Call it once fit has built the loop (on_train_start).
    """
    times = arms.hooks(cfg.ablation).sigterm_broadcasts()
    if times is None and os.environ.get(SIGTERM_BROADCASTS_VAR) is not None:
        times = int(os.environ[SIGTERM_BROADCASTS_VAR])
    if times is None:
        return
    loop = trainer.fit_loop.epoch_loop
    once: Callable[[], None] = loop._broadcast_sigterm_tensor

    def repeated() -> None:
        for _ in range(times):
            once()

    loop._broadcast_sigterm_tensor = repeated


# --- each --ablation's hooks (common/arms.py: one row of the table, one class here) -----------


class NativeLaunch(arms.Hooks):
    """--ablation native-launch: native's launcher starts the ranks, and native's ddp_setup joins
    the process group (and sets the device); Fabric's launch then adopts it (its
    _init_dist_connection returns when a group exists)."""

    arm = "fabric-native-launch"

    def starts_ranks(self) -> bool:
        return True

    def before_launch(self, cfg: BenchConfig, launch: launcher.Launch, fabric, prec) -> None:
        from native.benchmark import ddp_setup

        ddp_setup(cfg, launch)


class TorchAutocast(arms.Hooks):
    """--ablation torch-autocast: Lightning's public "32-true", so no plugin casts inputs or
    outputs or enters autocast, and fabric.autocast() is native's torch.autocast."""

    arm = "fabric-torch-autocast"

    def precision(self, plugin: dict[str, object]) -> dict[str, object]:
        return {"precision": "32-true"}

    def before_launch(self, cfg: BenchConfig, launch: launcher.Launch, fabric, prec) -> None:
        device_type = "cuda" if cfg.accelerator == "gpu" else "cpu"
        dtype, cache = precision.autocast_dtype(prec), prec.autocast_cache_enabled
        # MONKEYPATCH: this Fabric's autocast() replaced by native's (run() in native/benchmark.py)
        fabric.autocast = (
            (lambda: torch.autocast(device_type, dtype=dtype, cache_enabled=cache))
            if dtype is not None
            else contextlib.nullcontext
        )


class RawStep(arms.Hooks):
    """--ablation raw-step: fabric.setup returns DDP's module called under the precision's
    context and casts by hand (RawModule: no _FabricModule hooks) and the optimizer itself (no
    _FabricOptimizer); fabric.backward(loss) is loss.backward() (no strategy or precision
    backward)."""

    arm = "fabric-raw-step"

    def before_launch(self, cfg: BenchConfig, launch: launcher.Launch, fabric, prec) -> None:
        setup = fabric.setup

        def raw_setup(module, optimizer, **kwargs) -> tuple[RawModule, torch.optim.Optimizer]:
            """fabric.setup, then the wrappers taken off."""
            wrapped, fabric_optimizer = setup(module, optimizer, **kwargs)
            return RawModule(wrapped), fabric_optimizer.optimizer

        # MONKEYPATCH: this Fabric's setup() and backward() replaced on the instance
        fabric.setup = raw_setup
        fabric.backward = lambda loss: loss.backward()


class NoSigterm(arms.Hooks):
    """--ablation no-sigterm: the Trainer's loop without its per-step SIGTERM flag broadcast
    (sigterm_broadcasts replaces it)."""

    arm = "lightning-no-sigterm"

    def sigterm_broadcasts(self) -> int | None:
        return 0


class RawModule:
    """_FabricModule's forward without the wrapper (lightning/fabric/wrappers.py): the
    precision's input cast, forward context and output cast around DDP's module, by hand, and
    no tensor hook on the output. `module` is the model inside DDP, as _FabricModule's is."""

    def __init__(self, wrapped) -> None:
        """Take DDP's module, the model and the precision from a _FabricModule."""
        self.ddp = wrapped._forward_module  # the DistributedDataParallel wrapper
        self.module = self.ddp.module  # not wrapped.module: it fails on a compiled model
        self.precision = wrapped._strategy.precision

    def __call__(self, *args, **kwargs) -> object:
        """The forward: inputs cast, DDP's module under the precision's context, outputs cast."""
        args, kwargs = self.precision.convert_input((args, kwargs))
        with self.precision.forward_context():
            output = self.ddp(*args, **kwargs)
        return self.precision.convert_output(output)

    def parameters(self):
        """The model's parameters, as _FabricModule's (the run's digest reads them)."""
        return self.module.parameters()
