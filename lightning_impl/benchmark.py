"""The same benchmark as a LightningModule run by Trainer(barebones=True) with DDPStrategy.

    python -m lightning_impl --devices 2 --accelerator cpu --image-size 64 --batch-size-per-device 2 --steps 3
    torchrun --nproc-per-node 4 -m lightning_impl --devices 4 --output lightning.json
    srun python -m lightning_impl --devices 4 --output lightning.json   # inside sbatch

Read it beside native/benchmark.py: the `# DDP:` marks name each responsibility and say
where Lightning takes it over. Lightning re-runs this program in every rank it launches, so
nothing before `trainer.fit()` writes files or touches GPU memory.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import sys
import threading
import warnings

import torch

from common import config, launcher, precision, workload
from common.errors import UsageError, exit_on_usage_error
from common.checks import check_ranks_agree
from common.report import RunFacts, build_result, publish, rank_failed
from common.environment import utc_now
from common.steps import StepHooks, planned_steps
from lightning_impl.compat import LIGHTNING_EXTRA, lightning_facts, require_lightning, version_problem

PROG = "lightning_impl"
L = require_lightning()  # None when Lightning is missing; main() then exits 2


def main(argv: list[str] | None = None) -> int:
    """Parse, validate, then let the Trainer launch the ranks (or join them)."""
    argv = sys.argv[1:] if argv is None else argv
    cfg = config.parse(argv, PROG)
    with exit_on_usage_error(PROG, cfg.verbose):
        if L is None:
            raise UsageError(f"Lightning is not installed; install the extra: pip install '{LIGHTNING_EXTRA}'")
        if problem := version_problem(L):
            raise UsageError(problem)
        launch = launcher.detect(os.environ)
        launcher.validate(cfg, launch, os.environ)
        threads = workload.configure_threads(cfg.devices)
        prec = precision.resolve_precision(
            cfg.precision, cfg.accelerator, precision.local_bf16_support(cfg.accelerator, cfg.devices))
        # DDP: process launch -- handled by Trainer: it starts the other ranks inside fit()
        return run(cfg, launch, prec, threads, argv)


def ddp_setup(cfg: config.BenchConfig, launch: launcher.Launch, prec: precision.Precision):
    """A barebones Trainer whose DDPStrategy receives exactly native's settings."""
    from lightning.pytorch.plugins.environments import SLURMEnvironment
    from lightning.pytorch.strategies import DDPStrategy

    strategy_class = DDPStrategy
    if workload.ddp_stream(cfg, natural="side") == "current":
        # Diagnostic (--ddp-stream current): build the wrapper on the current stream, as
        # native does, instead of DDPStrategy's side stream; everything else is Lightning's own.
        class CurrentStreamDDPStrategy(DDPStrategy):
            def _setup_model(self, model):
                return torch.nn.parallel.DistributedDataParallel(
                    module=model, device_ids=self.determine_ddp_device_ids(), **self._ddp_kwargs)

        strategy_class = CurrentStreamDDPStrategy
    strategy = strategy_class(
        # DDP: process group -- handled by Trainer (DDPStrategy: NCCL/gloo, same timeout)
        process_group_backend="nccl" if cfg.accelerator == "gpu" else "gloo",
        timeout=dt.timedelta(seconds=cfg.timeout),
        # Slurm is joined through Lightning's own detection; no SIGUSR1 requeue in a benchmark
        cluster_environment=SLURMEnvironment(auto_requeue=False) if launch.kind == "slurm" else None,
        # DDP: model wrapper -- handled by Trainer, with native's keyword arguments; it builds the
        # wrapper on a side CUDA stream, which costs about 1 ms per step on an H200 (README)
        **workload.ddp_kwargs(cfg),
    )
    return L.Trainer(
        # DDP: device placement -- handled by Trainer (local rank -> GPU)
        accelerator=cfg.accelerator,
        devices=cfg.devices,
        num_nodes=cfg.num_nodes,
        strategy=strategy,  # DDPStrategy also for one device, else Lightning drops the wrapper
        # DDP: mixed precision -- handled by Trainer (autocast and GradScaler)
        precision=prec.lightning,
        benchmark=cfg.cudnn_benchmark,
        barebones=True,
        max_epochs=1,
        max_steps=planned_steps(cfg),
        use_distributed_sampler=False,
    )


def build(cfg: config.BenchConfig, prec: precision.Precision, launch: launcher.Launch,
          threads: int, argv: list[str]) -> ResNet50Benchmark:
    """The LightningModule: the same model, data, loss and optimizer as native."""
    return ResNet50Benchmark(cfg, prec, launch.kind, launch.slurm, threads, argv)


def train_step(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Forward and loss only; Lightning runs zero_grad, backward and the optimizer step."""
    # DDP: mixed precision -- handled by Trainer (autocast around training_step)
    # DDP: backward and optimizer step -- handled by Trainer (automatic optimisation)
    return workload.loss_fn(model(images), labels)


class ResNet50Benchmark(L.LightningModule if L is not None else object):
    """The benchmark as Lightning hooks; timing and checks come from `common` as in native."""

    def __init__(self, cfg: config.BenchConfig, prec: precision.Precision, launcher_kind: str,
                 slurm: dict[str, str] | None, threads: int, argv: list[str]) -> None:
        super().__init__()
        self.cfg, self.prec, self.threads, self.argv = cfg, prec, threads, argv
        self.launcher_kind, self.slurm = launcher_kind, slurm
        self.started = utc_now()
        self.model = workload.compile_model(cfg, workload.build_model(cfg))
        self.batch_size = 0
        self.result = None

    def say(self, msg: str) -> None:
        """Progress on global rank zero, outside the timed region."""
        if self.global_rank == 0:
            print(f"{PROG}: {msg}", flush=True)

    def setup(self, stage: str) -> None:
        """Per-device batch from Lightning's actual world size; ranks agree on precision."""
        self.batch_size = self.cfg.per_device_batch(self.trainer.world_size)
        check_ranks_agree(self.prec.resolved, "the resolved precision",
                          "GPUs differ between nodes: choose --precision explicitly")
        self.say(f"{self.trainer.world_size} rank(s) via {self.launcher_kind}, {self.device.type},"
                 f" precision {self.prec.resolved}")

    def on_train_start(self) -> None:
        """This rank's GPU-resident batch, identical to native's for the same seed and rank."""
        # DDP: data per rank -- each rank makes its own batch from seed + global rank
        self.images, self.labels = workload.make_batch(self.cfg, self.batch_size, self.global_rank, self.device)
        # DDP: timing and reporting -- ours in both runners; hooks bracket a step that never sees a clock
        self.hooks = StepHooks(self.cfg, self.device, self.global_rank, self.say)
        self.last_loss = torch.zeros((), device=self.device)
        stop_at_once_on_sigterm(self.trainer)

    def training_step(self, batch: int, batch_idx: int) -> torch.Tensor:
        """One step's forward and loss (the token `batch` only counts steps)."""
        return train_step(self.model, self.images, self.labels)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The same SGD as native."""
        return workload.build_optimizer(self.cfg, self.parameters())

    def train_dataloader(self) -> range:
        """One token per step; a plain iterable gets no DistributedSampler and no device copy."""
        return range(planned_steps(self.cfg))

    def on_train_batch_start(self, batch: int, batch_idx: int) -> None:
        """Timing, profiling and progress before each step."""
        self.hooks.before_step(batch_idx)

    def on_train_batch_end(self, outputs: dict, batch: int, batch_idx: int) -> None:
        """Timing and profiling after each optimizer step."""
        self.last_loss = outputs["loss"]
        self.hooks.after_step(batch_idx)

    def on_train_end(self) -> None:
        """Gather every rank's measurements; global rank zero keeps the Result."""
        facts = RunFacts(cfg=self.cfg, implementation="lightning", precision=self.prec, device=self.device,
                         rank=self.global_rank, local_rank=self.local_rank, world_size=self.trainer.world_size,
                         launcher=self.launcher_kind, slurm=self.slurm, started_utc=self.started,
                         command=["python", "-m", PROG, *self.argv], omp_num_threads=self.threads,
                         lightning=lightning_facts(self.trainer.world_size))
        self.result = build_result(facts, self.model, self.last_loss, self.hooks.timer.summary(), self.hooks.probe)


def run(cfg: config.BenchConfig, launch: launcher.Launch, prec: precision.Precision, threads: int,
        argv: list[str]) -> int:
    """Fit, report on global rank zero; the Trainer tears down its ranks."""
    quiet_lightning(cfg.verbose)
    precision.apply_backend_flags(prec, cfg.cudnn_benchmark)
    trainer = ddp_setup(cfg, launch, prec)
    module = build(cfg, prec, launch, threads, argv)
    try:
        try:
            trainer.fit(module)
        except SystemExit as stop:
            # Lightning turns SIGTERM into SystemExit() (status 0!) and Ctrl-C into SystemExit(1)
            # once it has stopped its ranks; a stopped benchmark must fail and write nothing.
            stop_started_ranks(trainer)
            signal_name = "SIGTERM" if getattr(trainer, "received_sigterm", False) else "an interrupt"
            print(f"{PROG}: rank {trainer.global_rank} stopped by {signal_name} before the last step;"
                  " no result written", file=sys.stderr, flush=True)
            return 143 if signal_name == "SIGTERM" else (stop.code if isinstance(stop.code, int) and stop.code else 1)
        if trainer.state.status != "finished":
            raise RuntimeError(f"Trainer ended with status {trainer.state.status}, not finished")
        if module.result is not None:
            publish(module.result, cfg, "PyTorch Lightning DDP benchmark")
        return 0
    except UsageError:
        raise
    except Exception as error:
        stop_started_ranks(trainer)
        if cfg.verbose:
            raise
        return rank_failed(PROG, trainer.global_rank, error)
    finally:
        # DDP: teardown -- handled by Trainer for its launcher; the group is left explicitly
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def stop_started_ranks(trainer) -> None:
    """Kill the ranks this process started, as native's launcher does when one rank fails.

    Lightning re-raises a rank-0 exception without stopping the ranks it launched (only its
    Ctrl-C path kills them); on NCCL they would wait in an all-reduce until the timeout.
    """
    launcher = trainer.strategy.launcher
    if launcher is not None and getattr(launcher, "procs", None):
        launcher.kill(signal.SIGKILL)


def stop_at_once_on_sigterm(trainer) -> None:
    """Replace Lightning's SIGTERM handler, once fit has installed it, by one that stops now.

    Lightning's handler broadcasts a flag from inside the signal handler; landing in the middle
    of a gradient all-reduce that collective can fail or deadlock the ranks (seen on gloo).
    A benchmark stopped by SIGTERM only has to end every rank promptly, non-zero, writing
    nothing. The per-step flag broadcast in Lightning's loop is untouched: it stays measured.
    """
    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, _frame: object) -> None:
        stop_started_ranks(trainer)
        print(f"{PROG}: rank {trainer.global_rank} stopped by SIGTERM; no result written", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def quiet_lightning(verbose: bool) -> None:
    """Hide Lightning's info lines, tips and known-harmless warnings unless --verbose."""
    if verbose:
        return
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"lightning\..*")
    warnings.filterwarnings("ignore", message=r".*(does not have many workers|Tensor Cores|barebones).*")
    # DDPStrategy builds the wrapper on a side stream; torch >= 2.10 then warns once per run.
    warnings.filterwarnings("ignore", message=r".*AccumulateGrad node's stream does not match.*")
