"""The H200 measurements as data: each plan is named by the question it answers.

    python -m experiment --list-plans
    python -m experiment --plan precisions -- --devices 1

A plan with variants writes one experiment folder per variant (DIR/<variant>/). Options after
`--` on the command line are added to every run of the plan. The minimal reference loop
(benchmarks/minimal_loop.py) is not a runner and stays a command of its own (docs/experiments.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common import arms as table
from common.errors import UsageError
from experiment.labelled_arms import Env, LabelledArm
from experiment.settings import PROFILE_RUNS

B256 = ("--batch-size-per-device", "256", "--precision", "bf16", "--channels-last")
B256_NCHW = ("--batch-size-per-device", "256", "--precision", "bf16")
# The original workload (32/GPU, NCHW) timed over 300 steps: over the default 50 (under a second)
# host interference moved one arm's run medians by 11-32% (results/h200/overhead/original-defaults).
LONG = ("--warmup-steps", "50", "--steps", "300")
# one experiment on a freshly started H200 answers the original workload's
# questions within about 9 minutes (run it with --target-half-width 1.5 --settle-minutes 3
# --budget-minutes 9; docs/experiments.md). 200 timed steps: runs of 15-20 s, so the warm-up
# round, settling and 5+ ABBA blocks of four arms fit; the block pairing absorbs slow drift.
ORIGINAL_WORKLOAD = ("--warmup-steps", "50", "--steps", "200")
COMPILED = ("--compile", "--warmup-steps", "20")
NATIVE, TRAINER = (
    LabelledArm("native", "native"),
    LabelledArm("lightning", "lightning"),
)  # the Trainer arm
FABRIC = LabelledArm("fabric", "fabric")


# Environments a plan's arms run in: DIR/<name>/bin/python under --envs DIR, each made by
# tools/make_env.py from its spec (docs/versions.md). 35e56ef is master after PR #21746 (DDP
# wrapped on the default stream); its wheel, built from the source, is version 2.6.2+git35e56ef.
ENVS = {
    e.name: e
    for e in (
        Env("lightning-2.5.1", "lightning==2.5.1"),  # before the per-step SIGTERM broadcast
        Env("lightning-2.5.5", "lightning==2.5.5"),  # the oldest release the runners accept
        Env("lightning-2.6.6", "lightning==2.6.6"),
        Env("lightning-35e56ef", "lightning==2.6.2+git35e56ef", wheels=True),
    )
}
# Lightning releases before 2.5.5 run only when asked for (lightning_impl/compat.py).
ALLOW_OLD = {"DDPBENCH_ALLOW_OLD_LIGHTNING": "1"}
# The per-step SIGTERM broadcast on CPU: 2 gloo ranks, a small model (the fixed per-step host
# cost weighs more), fp32 (no autocast, so 2.5.1's cast cache changes nothing).
CPU_GLOO = (
    "--accelerator",
    "cpu",
    "--devices",
    "2",
    "--arch",
    "mobilenet_v3_small",
    "--image-size",
    "32",
    "--num-classes",
    "10",
    "--batch-size-per-device",
    "2",
    "--precision",
    "fp32",
    "--warmup-steps",
    "10",
    "--steps",
    "60",
)


def version_arms(
    env: str, runners: tuple[str, ...] = ("fabric", "lightning")
) -> tuple[LabelledArm, ...]:
    """Each runner under the env's Lightning, labelled RUNNER-VERSION (lightning-2.5.5)."""
    version = env.removeprefix("lightning-")
    return tuple(LabelledArm(f"{r}-{version}", r, env=ENVS[env]) for r in runners)


@dataclass(frozen=True)
class Variant:
    """One experiment of a plan: its subfolder name, options and (optionally) its own arms."""

    name: str
    options: tuple[str, ...] = ()
    arms: tuple[LabelledArm, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)
    run_timeout: float | None = None


@dataclass(frozen=True)
class Plan:
    """A named question, its arms (the first is the baseline), repeats and variants."""

    name: str
    question: str
    arms: tuple[LabelledArm, ...] = (NATIVE, TRAINER)
    repeats: int = 3
    options: tuple[str, ...] = ()
    variants: tuple[Variant, ...] = (Variant(""),)
    # compare the arms though their workloads differ (compare's --allow-mismatch): arms that
    # vary a runner option on purpose
    allow_mismatch: bool = False
    # True: each repeat is one process of the interleaved mode (lightning_impl/interleaved.py,
    # both loops in it; its arms are its options), read by compare.interleaved, not compare
    in_process: bool = False
    profile_runs: str = PROFILE_RUNS[0]  # --profile-runs unless given; "all" where runs trace


# The two regimes: the GPU sets the pace (runs differ by ~0.5%), or the host does (the
# original scripts' defaults, 32/GPU NCHW: runs differ by 15-25%; less over 300 steps).
REGIMES = (
    Variant("gpu-bound", B256),
    Variant("original-defaults"),
    Variant("original-defaults-long", LONG),
)


def named_arms(*names: str) -> tuple[LabelledArm, ...]:
    """Arms of the table (common/arms.py), each labelled with its name."""
    return tuple(LabelledArm(name, name) for name in names)


def stream_arms() -> tuple[LabelledArm, ...]:
    """Each runner with its own DDP stream and with the other's: the table's rows of native and
    lightning that change no more than the stream (in stats.orders' carry-over-balanced orders)."""
    rows = [a for a in table.TABLE if a.runner in ("native", "lightning")]
    return named_arms(*(a.name for a in rows if {n for n, _ in a.settings} <= {"ddp_stream"}))


def delay_arms(arm: LabelledArm, delays: tuple[int, ...]) -> tuple[LabelledArm, ...]:
    """arm as it comes, then with a busy host spin of each delay (us) per step."""
    return (
        arm,
        *(
            LabelledArm(f"{arm.label}-host-delay-{us}", arm.runner, ("--host-delay-us", str(us)))
            for us in delays
        ),
    )


PLANS: tuple[Plan, ...] = (
    Plan(
        "fork-check",
        "Does a run forked from a warm interpreter measure what a fresh process measures"
        " (native started fresh against native forked, an A/A)?",
        arms=(
            LabelledArm("fresh", "native", launch="fresh"),
            LabelledArm("forked", "native", launch="fork"),
        ),
        repeats=10,
        # gpu-bound: the demo's workload; as-given: only the options after -- (the CPU test)
        variants=(Variant("gpu-bound", B256), Variant("as-given")),
    ),
    Plan(
        "overhead",
        "What does Lightning's Trainer cost against native, in each regime?",
        repeats=7,
        variants=REGIMES,
    ),
    Plan(
        "a-a",
        "Does native against itself come out 'no difference' (the method's A/A check)?",
        arms=(NATIVE, LabelledArm("native-b", "native")),
        repeats=5,
        variants=REGIMES,
    ),
    Plan(
        "arms",
        "What does each arm cost: Fabric against native, the Trainer against Fabric,"
        " the Trainer's services against barebones (and the three runners compiled)?",
        arms=(NATIVE, FABRIC, TRAINER, LabelledArm("lightning-services", "lightning-services")),
        # compiled as transformer users run it: torch.compile before the DDP wrapper, each run
        # loading the graphs the experiment's first run compiled (the services left out: the
        # three runners' question in 5 minutes of one GPU)
        variants=(
            *REGIMES,
            Variant("gpu-bound-compiled", (*B256, *COMPILED), (NATIVE, FABRIC, TRAINER)),
        ),
    ),
    Plan(
        "original-workload",
        "At the original workload (32/GPU, NCHW, bf16) on a fresh machine: Fabric against"
        " native, the Trainer against Fabric, an A/A, and each arm's host cost per step?",
        arms=(NATIVE, LabelledArm("native-b", "native"), FABRIC, TRAINER),
        repeats=8,
        options=ORIGINAL_WORKLOAD,
    ),
    Plan(
        "precisions",
        "Is Lightning's overhead the same at every precision?",
        variants=tuple(
            Variant(p, ("--batch-size-per-device", "256", "--precision", p, "--channels-last"))
            for p in ("fp32", "tf32", "bf16", "fp16")
        ),
    ),
    Plan(
        "compile-modes",
        "Does torch.compile (and which mode) change Lightning's overhead?",
        options=B256,
        variants=(
            Variant("eager"),
            Variant("default", COMPILED),
            Variant(
                "reduce-overhead",
                (*COMPILED, "--compile-mode", "reduce-overhead"),
                env={"TORCH_LOGS": "perf_hints"},
            ),
            Variant("max-autotune", (*COMPILED, "--compile-mode", "max-autotune"), run_timeout=330),
        ),
    ),
    Plan(
        "optimizer-kernels",
        "Do fused SGD and cuDNN autotuning change the step time or the overhead?",
        options=B256,
        variants=(
            Variant("fused", ("--sgd-impl", "fused")),
            Variant("compile-fused", (*COMPILED, "--sgd-impl", "fused")),
            Variant("no-cudnn-benchmark", ("--no-cudnn-benchmark",)),
        ),
    ),
    Plan(
        "ddp-stream-swap",
        "Does the stream Lightning builds the DDP wrapper on explain its overhead?",
        arms=stream_arms(),
        repeats=2,
        allow_mismatch=True,
        variants=(
            Variant("bf16", B256),
            Variant("bf16-nchw", B256_NCHW),
            Variant("original-defaults-long", LONG),
            Variant(
                "fp16", ("--batch-size-per-device", "256", "--precision", "fp16", "--channels-last")
            ),
            Variant("compile", (*B256, *COMPILED)),
        ),
    ),
    Plan(
        "host-slack",
        "Does extra host work per step lengthen the step (is the step host-bound)?",
        repeats=2,
        options=B256,
        allow_mismatch=True,
        variants=(
            Variant("native", arms=delay_arms(NATIVE, (1000, 2000, 3000, 4000))),
            Variant("lightning", arms=delay_arms(TRAINER, (2000,))),
        ),
    ),
    Plan(
        "host-profile",
        "Where does each runner's host time per step go (cProfile of the timed steps)?",
        repeats=1,
        options=(*B256, "--pyprofile", "{out}/pyprofile/{run}.pstats"),
    ),
    Plan(
        "traces",
        "Where does Lightning's extra GPU idle time come from (Chrome traces)?",
        repeats=1,
        profile_runs="all",
        allow_mismatch=True,
        options=(
            "--batch-size-per-device",
            "256",
            "--profile-steps",
            "3",
            "--trace",
            "{out}/traces/{run}.trace.json",
        ),
        variants=(
            Variant("bf16", ("--precision", "bf16", "--channels-last")),
            Variant("fp16", ("--precision", "fp16", "--channels-last")),
            Variant(
                "swapped-streams-bf16",
                ("--precision", "bf16", "--channels-last"),
                arms=stream_arms()[2:],
            ),
            Variant(
                "side-stream-bf16-nchw", ("--precision", "bf16"), arms=(NATIVE, stream_arms()[2])
            ),
        ),
    ),
)


PLANS += (
    Plan(
        "lightning-versions",
        "What do the Trainer and Fabric cost against native under Lightning 2.5.5, 2.6.6 and"
        " master 35e56ef (DDP on the default stream): does 35e56ef remove the side-stream effect?",
        arms=(
            NATIVE,
            *version_arms("lightning-2.5.5"),
            *version_arms("lightning-2.6.6"),
            *version_arms("lightning-35e56ef"),
        ),
        variants=(Variant("bf16", B256), Variant("bf16-nchw", B256_NCHW)),
    ),
    Plan(
        "sigterm-cpu",
        "At 2 gloo CPU ranks, does the Trainer's per-step SIGTERM broadcast (Lightning >= 2.5.2)"
        " cost host time per step: the Trainer under 2.5.1 against 2.5.5?",
        arms=(
            NATIVE,
            *version_arms("lightning-2.5.1", ("lightning",)),
            *version_arms("lightning-2.5.5", ("lightning",)),
        ),
        repeats=5,
        options=CPU_GLOO,
        variants=(Variant("", env=ALLOW_OLD),),
    ),
)


# The interleaved mode at the original workload (32/GPU, NCHW, bf16). The process is the unit
# of evidence (issue 45), so a variant is IN_PROCESS_REPEATS fresh processes, the build order
# alternated (experiment/in_process.py), each of 2 runs of 40 pairs of 2-step chunks (320 timed
# steps, about 10 s at 30 ms a step) after 25 warm-up pairs (50 steps of each loop). A fresh
# process costs about 20 s besides (imports of torch and Lightning 10-15 s, the CUDA context,
# both models, autotuning, the warm-up), and the variant's --check one more import: about 3.3
# minutes a variant on an H200's host. The mode takes no --steps: runs x pairs x 2K steps are
# timed; more processes (--repeats) narrow the interval more than longer ones once the process
# effect shows (docs/interleaved-2026-12.md).
IN_PROCESS = ("--precision", "bf16", "--warmup-steps", "50", "--runs", "2", "--pairs", "40")
IN_PROCESS_REPEATS = 6
PLANS += (
    Plan(
        "in-process",
        "Per-step cost in one process, interleaved: Fabric's loop against native's, chunk by"
        " chunk, A/A of each loop, native on the side stream, and where the GPU sets the pace?",
        repeats=IN_PROCESS_REPEATS,
        options=IN_PROCESS,
        in_process=True,
        variants=(
            Variant("fabric-vs-native", ("--baseline", "native", "--arm", "fabric")),
            Variant("a-a-native", ("--baseline", "native", "--arm", "native")),
            Variant("a-a-fabric", ("--baseline", "fabric", "--arm", "fabric")),
            Variant("native-side-stream", ("--baseline", "native", "--arm", "native-side")),
            Variant("gpu-bound", (*B256, "--baseline", "native", "--arm", "fabric")),
        ),
    ),
)


# The gpt workload (GPT-2 small, 124M parameters, sequences of 1024 tokens) in bf16 (issue 46):
# 8 sequences (8,192 tokens) per GPU keep it busy, where a probe on an H100 put Fabric 8.6-9.3%
# above native (60 timed steps after 15, as here); 1 sequence per GPU leaves the host a larger
# share of a shorter step, timed over more steps as the original image workload is (LONG).
# Ask it of one GPU in one command:
#   python -m experiment --plan gpt --variant gpu-bound --target-half-width 0.5 \
#       --budget-minutes 5 -- --devices 1
GPT = ("--workload", "gpt", "--precision", "bf16")
PLANS += (
    Plan(
        "gpt",
        "On a GPT-style decoder (GPT-2 small, bf16): what do Fabric and the Trainer cost against"
        " native, GPU-bound (8 sequences per GPU; eager, and compiled as users run it) and with 1"
        " sequence per GPU?",
        arms=(NATIVE, FABRIC, TRAINER),
        repeats=5,
        variants=(
            Variant(
                "gpu-bound",
                (*GPT, "--batch-size-per-device", "8", "--warmup-steps", "15", "--steps", "60"),
            ),
            Variant("small-batch", (*GPT, "--batch-size-per-device", "1", *LONG)),
            Variant(
                "gpu-bound-compiled",
                (*GPT, "--batch-size-per-device", "8", *COMPILED, "--steps", "60"),
            ),
        ),
    ),
)


# Where Lightning's cost comes from (issue 47): native, Fabric, the Trainer, its services and the
# ablations of the arms table (common/arms.py), each handing one responsibility back; compare
# decomposes the Trainer's total into them ("Where the cost comes from"). With one GPU the launch
# and SIGTERM ablations isolate nothing (their `one_rank`) and are left out, the report says why;
# responsibilities-cpu (2 gloo ranks, bf16 autocast on the CPU) runs every arm, native-fp32-logits
# too, and its stream ablation is a true no-op (a CPU has no CUDA streams): an A/A of an ablation
# in real runs. The GPU runs are short (ResNet-50 25 timed steps, GPT-2 small 40: about 7-8.5 s
# forked on an H100, about a minute a block of 7 arms). 8 blocks by default: the residual's 90%
# interval lies within +-1 pp (the parts explain a true 0) in 77% of simulated experiments at 5
# blocks, 92% at 6 and 99% at 8 on a quiet GPU (0.2% run noise; 21 blocks at 0.5%, about 80 at
# 1%: tests/test_stats_residual.py), and from 8 blocks a run that a neighbour's job slowed is
# left out instead of opening the residual's interval (stats.blocks.outlying_blocks), and the
# smallest detectable sizes are shown. A whole carry-over-balanced cycle of 7 arms is 14
# blocks; the 8 run first are the cycle's best-balanced 8 (stats.orders: no two arms differ by
# more than 2 in how often they followed an arm), which the manifest and report state. About
# 9 minutes a variant with the imports and one warm-up round:
#   python -m experiment --plan responsibilities --settle-minutes 0 --budget-minutes 10 \
#       --out results/h100/responsibilities -- --devices 1
# The rows of the table: the runners, each part, and each detail an --ablation makes (not the
# stream's: native-side-stream and lightning-current-stream are the ddp-stream-swap plan's);
# with one GPU, those that isolate something there, without the details.
RESPONSIBILITY_ARMS = tuple(
    a.name for a in table.TABLE if a.role in ("main", "part") or "ablation" in dict(a.settings)
)
ONE_GPU = tuple(
    name
    for name in RESPONSIBILITY_ARMS
    if table.ARMS[name].one_rank is None and table.ARMS[name].role != "detail"
)
# 2 gloo ranks, bf16 autocast on the CPU (the precision ablations then change something real);
# a small CNN (bf16 convolutions are slow on a CPU: 30 steps) with a smaller step size (no
# divergence), and the tiny GPT
CPU_BF16 = ("--accelerator", "cpu", "--devices", "2", "--precision", "bf16")
CPU_IMAGE = (
    *("--arch", "squeezenet1_1", "--image-size", "32", "--num-classes", "10", "--lr", "0.01"),
    *("--batch-size-per-device", "2", "--warmup-steps", "5", "--steps", "30"),
)
CPU_GPT = (
    *("--workload", "gpt", "--gpt-preset", "tiny"),
    *("--batch-size-per-device", "2", "--warmup-steps", "10", "--steps", "60"),
)
PLANS += (
    Plan(
        "responsibilities",
        "Where does Lightning's cost come from: what does each responsibility it takes over"
        " cost (each ablation against its parent), and do the parts add up to the total?",
        arms=named_arms(*ONE_GPU),
        repeats=8,
        variants=(
            Variant("image", (*B256, "--warmup-steps", "10", "--steps", "25")),
            Variant(
                "gpt",
                (*GPT, "--batch-size-per-device", "8", "--warmup-steps", "10", "--steps", "40"),
            ),
            Variant(
                "gpt-compiled", (*GPT, "--batch-size-per-device", "8", *COMPILED, "--steps", "40")
            ),
        ),
    ),
    Plan(
        "responsibilities-cpu",
        "The same on 2 gloo CPU ranks, every arm (the launch and SIGTERM ablations too): where"
        " does Lightning's cost come from when the host sets the pace?",
        arms=named_arms(*RESPONSIBILITY_ARMS),
        repeats=6,
        variants=(Variant("image", (*CPU_BF16, *CPU_IMAGE)), Variant("gpt", (*CPU_BF16, *CPU_GPT))),
    ),
)


def find(name: str) -> Plan:
    """The plan called name; UsageError listing the names otherwise."""
    for plan in PLANS:
        if plan.name == name:
            return plan
    raise UsageError(
        f"--plan: no plan '{name}'; choose from {', '.join(p.name for p in PLANS)} (--list-plans)"
    )
