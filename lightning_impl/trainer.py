"""The same benchmark as a LightningModule run by a Trainer with DDPStrategy (barebones).

    python -m lightning_impl --devices 2 --accelerator cpu --workload gpt --gpt-preset tiny
    torchrun --nproc-per-node 4 -m lightning_impl --devices 4 --output lightning.json
    srun python -m lightning_impl --devices 4 --output lightning.json   # inside sbatch

Read it beside native/benchmark.py and lightning_impl/fabric.py (diff -y -W 210): the `# DDP:`
marks say where the Trainer takes each responsibility over, and each line that differs says
what it replaces (`# native: ...`). The Trainer re-runs this program in every rank it
launches, so nothing before `trainer.fit()` writes files or touches GPU memory.
"""

from __future__ import annotations

import datetime as dt  # native: also contextlib, for its nullcontext autocast
import os
import sys  # native: in launch.py, which parses the command line

import torch
import torch.distributed as dist

from common import config, launcher, precision, preflight, training
from common.checks import check_ranks_agree
from common.environment import utc_now
from common.errors import UsageError, exit_on_usage_error
from common.lifetime import become_launcher, follow_launcher  # native: in launch.py
from common.report import RunFacts, build_result, publish, rank_failed
from common.steps import StepHooks, planned_steps  # native: StepHooks (its own loop)
from common.timing import mark_phase
from lightning_impl import ablations, services, workarounds  # native: DistributedDataParallel
from lightning_impl.compat import check_lightning, lightning_facts  # native: (no framework)

PROG = "lightning_impl"
IMPLEMENTATION = "lightning"
LIGHTNING = workarounds.LIGHTNING  # native: (no framework); None if missing: main() exits 2


def main(argv: list[str] | None = None) -> int:
    """Parse, validate, then let the Trainer launch the ranks (or join them)."""
    mark_phase("imports")
    follow_launcher(os.environ)  # native: in launch.py; a rank the Trainer started dies with it
    argv = sys.argv[1:] if argv is None else argv
    cfg = config.parse(argv, PROG)  # native: parsed and checked once, in launch.py's main()
    with exit_on_usage_error(PROG, cfg.verbose):
        if not cfg.barebones:  # native: refuses --no-barebones (preflight)
            services.services_folder(cfg, create=not cfg.check)  # chosen (or refused) here
        check_lightning(LIGHTNING)  # native: (no framework to check)
        plan = preflight.check(cfg, runner="lightning")
        if cfg.check:
            return preflight.passed(PROG, cfg, plan)
        become_launcher(os.environ)  # native: launch_ranks passes its pid to the ranks
        # DDP: process launch -- handed to the Trainer: it starts the other ranks inside fit()
        training.configure_threads(plan.threads)
        return run(cfg, plan.launch, plan.precision, plan.threads, argv)


def trainer_setup(cfg: config.BenchConfig, launch: launcher.Launch, prec: precision.Precision):
    """A Trainer that takes over process group, device, wrapper and precision; native's settings."""
    from lightning.pytorch.plugins.environments import SLURMEnvironment
    from lightning.pytorch.strategies import DDPStrategy

    strategy = ablations.ddp_strategy_class(cfg, DDPStrategy)(
        # DDP: process group -- handed to the Trainer (DDPStrategy: NCCL/gloo, the same timeout)
        process_group_backend="nccl" if cfg.accelerator == "gpu" else "gloo",
        timeout=dt.timedelta(seconds=cfg.timeout),
        # Slurm is joined through Lightning's own detection; no SIGUSR1 requeue in a benchmark
        cluster_environment=(
            SLURMEnvironment(auto_requeue=False) if launch.kind == "slurm" else None
        ),
        # DDP: model wrapper -- handed to the Trainer: DDPStrategy wraps with native's arguments,
        # on a side CUDA stream, which costs about 1 ms per step on an H200 (README)
        **training.ddp_kwargs(cfg),
    )
    return LIGHTNING.Trainer(
        # DDP: device placement -- handed to the Trainer (local rank -> GPU)
        accelerator=cfg.accelerator,
        devices=cfg.devices,
        num_nodes=cfg.num_nodes,
        strategy=strategy,  # DDPStrategy also for one device, else Lightning drops the wrapper
        # DDP: mixed precision -- handed to the Trainer (autocast and GradScaler)
        precision=prec.lightning,
        benchmark=cfg.cudnn_benchmark,
        max_epochs=1,
        max_steps=planned_steps(cfg),
        use_distributed_sampler=False,
        # --no-barebones: progress bar, model summary, CSV logger, checkpoint (services.py)
        barebones=cfg.barebones,
        **({} if cfg.barebones else services.trainer_services(cfg)),
    )


class BenchmarkModule(workarounds.LightningModule):  # native: build() and train_step()
    """native's build(), train_step() and loop body as Lightning hooks; `common` times them."""

    def __init__(
        self,
        cfg: config.BenchConfig,
        prec: precision.Precision,
        launch: launcher.Launch,
        threads: int,
        argv: list[str],
    ) -> None:
        super().__init__()
        self.cfg, self.prec, self.launch, self.threads, self.argv = cfg, prec, launch, threads, argv
        self.started = utc_now()
        self.wl = training.declared(cfg)  # what --workload trains: its model, batch and loss
        # native: .to(device) and DistributedDataParallel(...): the Trainer does both in fit()
        self.model = training.compile_model(cfg, training.build_model(cfg))
        self.result = None

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """native's optimizer; the fp16 GradScaler is the Trainer's precision plugin's."""
        return training.build_optimizer(self.cfg, self.parameters())

    def training_step(self, batch: int, batch_idx: int) -> torch.Tensor:
        """native's train_step(): here forward and loss; the Trainer does the rest."""
        # DDP: mixed precision -- handed to the Trainer: autocast around this method only
        loss = self.wl.loss(self.model(self.batch.inputs), self.batch.targets)
        # DDP: backward and optimizer step -- handed to the Trainer's automatic optimisation, in
        # native's order: zero_grad after forward, backward (scaled), (unscale,) step, update
        if not self.cfg.barebones:
            self.log("loss", loss, prog_bar=True)  # --no-barebones: logged every step
        return loss

    def say(self, msg: str) -> None:
        """Progress on global rank zero, outside the timed region."""
        if self.global_rank == 0:
            print(f"{PROG}: {msg}", flush=True)

    def setup(self, stage: str) -> None:
        """native's run() before build: ranks agree on precision."""
        mark_phase("process_group")  # native: after ddp_setup; here joined before setup()
        check_ranks_agree(
            self.prec.resolved,
            "the resolved precision",
            "GPUs differ between nodes: choose --precision explicitly",
        )
        self.say(
            f"{self.trainer.world_size} rank(s) via {self.launch.kind}, {self.device.type},"
            f" precision {self.prec.resolved}"
        )
        if not self.cfg.barebones:
            self.say(f"logs and checkpoint in {services.services_folder(self.cfg)}")

    def on_train_start(self) -> None:
        """native's run() before its loop: this rank's batch and the step hooks."""
        # DDP: data per rank -- each rank makes its own batch from seed + global rank
        batch_size = self.cfg.per_device_batch(self.trainer.world_size)
        self.batch = training.make_batch(self.cfg, batch_size, self.global_rank, self.device)
        # DDP: timing and reporting -- ours in every runner; hooks bracket a step without a clock
        self.hooks = StepHooks(self.cfg, self.device, self.global_rank, self.say)
        self.last_loss = torch.zeros((), device=self.device)
        workarounds.stop_at_once_on_signals(self.trainer.strategy, PROG, self.global_rank)
        ablations.sigterm_broadcasts(self.cfg, self.trainer)  # --ablation no-sigterm; native: none

    def train_dataloader(self) -> range:
        """native's `range(steps)`: one token per step (no DistributedSampler, no device copy)."""
        return range(planned_steps(self.cfg))

    def on_train_batch_start(self, batch: int, batch_idx: int) -> None:
        """native's hooks.before_step(step)."""
        self.hooks.before_step(batch_idx)

    def on_train_batch_end(self, outputs: dict, batch: int, batch_idx: int) -> None:
        """native's hooks.after_step(step), after the optimizer step."""
        self.last_loss = outputs["loss"]
        self.hooks.after_step(batch_idx)

    def on_train_end(self) -> None:
        """native's run() after its loop: gather every rank's measurements on global rank zero."""
        world_size = self.trainer.world_size
        facts = RunFacts(
            cfg=self.cfg,
            implementation=IMPLEMENTATION,
            precision=self.prec,
            device=self.device,
            rank=self.global_rank,
            local_rank=self.local_rank,
            world_size=world_size,
            launcher=self.launch.kind,
            slurm=self.launch.slurm,
            started_utc=self.started,
            command=["python", "-m", PROG, *self.argv],
            omp_num_threads=self.threads,
            lightning=lightning_facts(world_size, barebones=self.cfg.barebones),
        )
        timing, probe = self.hooks.timer.summary(), self.hooks.probe
        self.result = build_result(facts, self.model, self.last_loss, timing, probe)


def run(
    cfg: config.BenchConfig,
    launch: launcher.Launch,
    prec: precision.Precision,
    threads: int,
    argv: list[str],
) -> int:
    """Rank 0 of a self-launch, or one rank: fit, report; tear down in every case."""
    workarounds.quiet_lightning(cfg.verbose, keep_info=not cfg.barebones)  # native: (no framework)
    precision.apply_backend_flags(prec, cfg.cudnn_benchmark)
    trainer = trainer_setup(cfg, launch, prec)  # native: device = ddp_setup(cfg, launch)
    module = BenchmarkModule(cfg, prec, launch, threads, argv)  # native: build(), in the try
    try:
        try:
            trainer.fit(module)  # native: the loop; here the hooks above, called by the Trainer
        except SystemExit as stop:
            return workarounds.exit_status_of_stop(trainer, PROG, stop)
        if trainer.state.status != "finished":
            raise RuntimeError(f"Trainer ended with status {trainer.state.status}, not finished")
        if module.result is not None:
            publish(module.result, cfg, "PyTorch Lightning DDP benchmark")
        return 0
    except UsageError:
        raise
    except Exception as error:
        workarounds.stop_started_ranks(trainer.strategy)  # native: its launcher stops them
        if cfg.verbose:
            raise
        return rank_failed(PROG, trainer.global_rank, error)  # native: launch.rank
    finally:
        # DDP: teardown -- the Trainer ends the ranks it started; the group is left here, as native
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
