"""Launcher detection and the mismatches both runners reject before any process group."""

from __future__ import annotations

import os
import socket

import pytest
from conftest import needs_lightning
from hypothesis import given, settings
from hypothesis import strategies as st

from common import config, launcher
from common.errors import UsageError


def cfg(*argv: str) -> config.BenchConfig:
    return config.parse(["--accelerator", "cpu", *argv], prog="test")


def static(config_: config.BenchConfig, env: dict[str, str]) -> None:
    """detect + validate without the rendezvous probe (these environments name no real host)."""
    launcher.validate(config_, launcher.detect(env), env, rendezvous=False)


SRUN_TASK = {
    "SLURM_NTASKS": "2",
    "SLURM_NTASKS_PER_NODE": "2",
    "SLURM_NNODES": "1",
    "SLURM_PROCID": "1",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "0",
    "SLURM_STEP_ID": "0",
    "SLURM_JOB_ID": "4321",
    "SLURM_JOB_NAME": "bench",
    "SLURM_NODELIST": "gpu[003-004]",
}


def test_slurm_task_is_detected_with_its_rank_and_first_host():
    launch = launcher.detect(SRUN_TASK)
    assert (launch.kind, launch.rank, launch.local_rank, launch.world_size) == ("slurm", 1, 1, 2)
    assert launch.master_addr == "gpu003"
    assert launch.master_port == 15000 + 4321  # Lightning's rule when MASTER_PORT is unset
    assert launch.slurm["SLURM_JOB_ID"] == "4321"


def test_master_port_from_environment_wins():
    assert launcher.detect({**SRUN_TASK, "MASTER_PORT": "29400"}).master_port == 29400


@pytest.mark.parametrize(
    "nodelist,first",
    [
        ("node1", "node1"),
        ("a,b,c", "a"),
        ("gpu[7]", "gpu7"),
        ("gpu[003-004,007],x1", "gpu003"),
        ("h0 h1", "h0"),
    ],
)
def test_first_host_of_a_nodelist(nodelist, first):
    assert launcher.first_host(nodelist) == first


def test_interactive_job_named_bash_is_not_slurm_as_in_lightning():
    assert launcher.detect({**SRUN_TASK, "SLURM_JOB_NAME": "bash"}).kind == "self"


def test_torchrun_wins_over_slurm():
    env = {
        **SRUN_TASK,
        "TORCHELASTIC_RUN_ID": "x",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
    }
    assert launcher.detect(env).kind == "torchrun"


def test_plain_python_is_the_self_launching_parent():
    launch = launcher.detect({})
    assert launch.kind == "self" and not launch.is_child


def test_slurm_tasks_per_node_must_equal_devices():
    with pytest.raises(
        UsageError, match=r"Slurm runs 2 tasks per node .* but --devices is 1; set --devices 2"
    ):
        static(cfg("--devices", "1"), SRUN_TASK)


def test_slurm_nodes_must_equal_num_nodes():
    env = {**SRUN_TASK, "SLURM_NNODES": "2", "SLURM_NTASKS": "4"}
    with pytest.raises(UsageError, match=r"Slurm allocated 2 nodes .* --num-nodes is 1"):
        static(cfg("--devices", "2"), env)


def test_batch_script_without_srun_is_refused_instead_of_hanging():
    env = {k: v for k, v in SRUN_TASK.items() if k != "SLURM_STEP_ID"} | {
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
    }
    with pytest.raises(UsageError, match=r"not started by srun; start it with `srun python -m"):
        static(cfg("--devices", "2"), env)


def test_matching_slurm_task_passes():
    static(cfg("--devices", "2"), SRUN_TASK)


def test_torchrun_world_size_must_match_devices_times_nodes():
    env = {
        "TORCHELASTIC_RUN_ID": "x",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
    }
    with pytest.raises(
        UsageError, match=r"torchrun started WORLD_SIZE=4 processes but --devices 2 x --num-nodes 1"
    ):
        static(cfg("--devices", "2"), env)


def test_self_launch_cannot_span_nodes():
    with pytest.raises(UsageError, match=r"--num-nodes 2 needs a launcher on every node"):
        static(cfg("--num-nodes", "2"), {})


def test_incomplete_launcher_environment_is_named():
    env = {"TORCHELASTIC_RUN_ID": "x", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1"}
    with pytest.raises(UsageError, match=r"RANK is not set"):
        launcher.detect(env)


TORCHRUN = {
    "TORCHELASTIC_RUN_ID": "x",
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "2",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
}


def test_matching_torchrun_rank_passes():
    static(cfg("--devices", "2"), TORCHRUN)


@pytest.mark.parametrize(
    "change,message",
    [
        (
            {"RANK": "2"},
            r"RANK=2 is outside 0..1 \(WORLD_SIZE=2\); a rank outside the world would wait",
        ),
        ({"RANK": "-1"}, r"RANK=-1 is outside 0..1"),
        ({"LOCAL_RANK": "-1"}, r"LOCAL_RANK=-1 is outside 0..1 \(LOCAL_WORLD_SIZE=2\)"),
        ({"LOCAL_RANK": "2", "RANK": "1"}, r"LOCAL_RANK=2 is outside 0..1"),
        (
            {"RANK": "0"},
            r"RANK=0 does not match GROUP_RANK=0 x LOCAL_WORLD_SIZE=2 \+ LOCAL_RANK=1 = 1",
        ),
        ({"GROUP_RANK": "1"}, r"GROUP_RANK=1 is outside 0..0 \(--num-nodes=1\)"),
        (
            {"MASTER_PORT": "99999"},
            r"MASTER_PORT='99999' is not a TCP port; use a number in 1..65535",
        ),
        ({"MASTER_PORT": "0"}, r"MASTER_PORT='0' is not a TCP port"),
        ({"MASTER_PORT": "1_0"}, r"MASTER_PORT='1_0' is not a whole number"),
        ({"MASTER_ADDR": ""}, r"MASTER_ADDR='' is not a host name"),
    ],
)
def test_torchrun_variables_out_of_range_are_refused(change, message):
    env = {**TORCHRUN, **change}
    with pytest.raises(UsageError, match=message):
        static(cfg("--devices", "2"), env)


def test_second_node_rank_must_follow_torchruns_numbering():
    env = {**TORCHRUN, "WORLD_SIZE": "4", "GROUP_RANK": "1", "RANK": "3"}
    static(cfg("--devices", "2", "--num-nodes", "2"), env)
    env["RANK"] = "1"
    with pytest.raises(
        UsageError, match=r"RANK=1 does not match GROUP_RANK=1 x LOCAL_WORLD_SIZE=2"
    ):
        static(cfg("--devices", "2", "--num-nodes", "2"), env)


@pytest.mark.parametrize(
    "change,message",
    [
        ({"SLURM_PROCID": "2"}, r"SLURM_PROCID=2 is outside 0..1 \(SLURM_NTASKS=2\)"),
        ({"SLURM_LOCALID": "-1"}, r"SLURM_LOCALID=-1 is outside 0..1"),
        ({"SLURM_NODEID": "1"}, r"SLURM_NODEID=1 is outside 0..0 \(--num-nodes=1\)"),
        ({"MASTER_PORT": "70000"}, r"MASTER_PORT='70000' is not a TCP port"),
    ],
)
def test_slurm_variables_out_of_range_are_refused(change, message):
    env = {**SRUN_TASK, **change}
    with pytest.raises(UsageError, match=message):
        static(cfg("--devices", "2"), env)


def test_slurm_derived_port_is_lightnings_and_always_a_port():
    for job_id, port in (("1", 15001), ("9999", 24999), ("123456789", 21789), ("10000", 15000)):
        assert launcher.detect({**SRUN_TASK, "SLURM_JOB_ID": job_id}).master_port == port


@pytest.mark.parametrize(
    "env,message",
    [
        (
            {"LOCAL_RANK": "0"},
            r"LOCAL_RANK=0 is set but neither torchrun nor srun started this process",
        ),
        ({"NODE_RANK": "3"}, r"NODE_RANK=3 is outside 0..0"),
        ({"MASTER_PORT": "65536"}, r"MASTER_PORT='65536' is not a TCP port"),
    ],
)
def test_stray_launcher_variables_in_a_plain_start_are_refused(env, message):
    """Lightning reads these in a plain start (and would wait for peers); both runners refuse."""
    with pytest.raises(UsageError, match=message):
        static(cfg("--devices", "2"), env)


def test_lightnings_own_children_pass_the_plain_checks():
    env = {
        "LOCAL_RANK": "1",
        "NODE_RANK": "0",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "12910",
    }
    static(cfg("--devices", "2"), env)


def test_cpu_ranks_beyond_the_affinity_are_refused_unless_forced(monkeypatch):
    monkeypatch.setattr(launcher.os, "sched_getaffinity", lambda pid: {0, 1})
    static(cfg("--devices", "2"), {})
    with pytest.raises(
        UsageError,
        match=r"--devices 3 runs 3 ranks on this node but this process may use 2"
        r" CPU\(s\) \(its CPU affinity\); use --devices 2 or fewer, or add"
        r" --oversubscribe-cpus",
    ):
        static(cfg("--devices", "3"), {})
    static(cfg("--devices", "3", "--oversubscribe-cpus"), {})


def test_cpu_ranks_under_srun_are_bounded_by_the_jobs_cpus_on_the_node(monkeypatch):
    """Each srun task may be bound to one CPU: its own affinity is not the node's budget."""
    monkeypatch.setattr(launcher.os, "sched_getaffinity", lambda pid: {0})
    env = {**SRUN_TASK, "SLURM_CPUS_ON_NODE": "2"}
    static(cfg("--devices", "2"), env)
    env = {**SRUN_TASK, "SLURM_CPUS_ON_NODE": "1"}
    with pytest.raises(
        UsageError,
        match=r"the job has 1 CPU\(s\) on this node \(SLURM_CPUS_ON_NODE\);"
        r" ask for more CPUs \(--cpus-per-task\)",
    ):
        static(cfg("--devices", "2"), env)


# --- every variable parsed strictly, named in the one line ------------


def check(env: dict[str, str], *argv: str) -> None:
    """detect + validate, without the rendezvous probe."""
    static(cfg("--devices", "2", *argv), env)


PLAIN_LIGHTNING_CHILD = {
    "LOCAL_RANK": "1",
    "NODE_RANK": "0",
    "WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "12910",
}


@pytest.mark.parametrize(
    "base,change,message",
    [
        ({}, {"OMP_NUM_THREADS": "²"}, r"OMP_NUM_THREADS='²' must be a whole number of threads"),
        ({}, {"OMP_NUM_THREADS": "٣"}, r"OMP_NUM_THREADS='٣' must be a whole number of threads"),
        ({}, {"OMP_NUM_THREADS": " 1"}, r"OMP_NUM_THREADS=' 1' must be a whole number of threads"),
        (
            {},
            {"OMP_NUM_THREADS": "0"},
            r"OMP_NUM_THREADS='0' must be a whole number of threads, from",
        ),
        ({}, {"OMP_NUM_THREADS": "9" * 30}, r"OMP_NUM_THREADS='9+' must be a whole number"),
        ({}, {"OMP_NUM_THREADS": "100000"}, r"OMP_NUM_THREADS='100000' must .* node's \d+ CPUs"),
        ({}, {"STANDALONE_PORT": "x"}, r"STANDALONE_PORT='x' is not a whole number"),
        ({}, {"MASTER_ADDR": "a b"}, r"MASTER_ADDR='a b' is not a host name"),
        (SRUN_TASK, {"SLURM_NNODES": "x"}, r"SLURM_NNODES='x' is not a whole number"),
        (SRUN_TASK, {"SLURM_NTASKS": "2 "}, r"SLURM_NTASKS='2 ' is not a whole number"),
        (SRUN_TASK, {"SLURM_PROCID": "1_0"}, r"SLURM_PROCID='1_0' is not a whole number"),
        (SRUN_TASK, {"SLURM_NODELIST": ""}, r"SLURM_NODELIST='' is not a Slurm node list"),
        (
            SRUN_TASK,
            {"SLURM_NODELIST": "gpu[003"},
            r"SLURM_NODELIST='gpu\[003' is not a Slurm node",
        ),
        (SRUN_TASK, {"SLURM_JOB_ID": "job_x"}, r"SLURM_JOB_ID='job_x' is not a Slurm job id"),
        (
            SRUN_TASK,
            {"SLURM_CPUS_ON_NODE": "abc"},
            r"SLURM_CPUS_ON_NODE='abc' is not a whole number",
        ),
        (SRUN_TASK, {"MASTER_ADDR": ""}, r"MASTER_ADDR='' is not a host name"),
        (PLAIN_LIGHTNING_CHILD, {"NODE_RANK": "-0x1"}, r"NODE_RANK='-0x1' is not a whole number"),
    ],
)
def test_malformed_variables_are_refused_by_name(base, change, message):
    with pytest.raises(UsageError, match=message):
        check({**base, **change})


@pytest.mark.parametrize("missing", ["SLURM_NODEID", "SLURM_LOCALID", "SLURM_PROCID"])
def test_slurm_task_without_its_ids_is_refused_as_lightning_would(missing):
    """Lightning's SLURMEnvironment reads int(os.environ[...]) for each: a KeyError there."""
    env = {k: v for k, v in SRUN_TASK.items() if k != missing}
    with pytest.raises(UsageError, match=rf"{missing} is not set but SLURM_NTASKS is: srun sets"):
        check(env)


def test_slurm_ntasks_without_tasks_per_node_is_refused_as_lightning_would():
    env = {k: v for k, v in SRUN_TASK.items() if k != "SLURM_NTASKS_PER_NODE"}
    with pytest.raises(UsageError, match=r"SLURM_NTASKS=2 but SLURM_NTASKS_PER_NODE is not set"):
        check(env)
    one = {**env, "SLURM_NTASKS": "1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0"}
    check(one, "--devices", "1")  # one task: Lightning accepts it too


def test_plain_start_port_follows_lightnings_rule():
    assert launcher.detect({"MASTER_PORT": "2345"}).master_port == 2345
    assert launcher.detect({"STANDALONE_PORT": "2346"}).master_port == 2346
    assert launcher.detect({"MASTER_PORT": "2345", "STANDALONE_PORT": "2346"}).master_port == 2345
    assert 1024 <= launcher.detect({}).master_port <= 65535  # a free port, not a fixed one


LIGHTNING_INT_NAMES = [
    "SLURM_NTASKS",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_NNODES",
    "SLURM_CPUS_ON_NODE",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "SLURM_NODELIST",
    "MASTER_ADDR",
    "OMP_NUM_THREADS",
]
ENV_TEXT = (
    st.text(max_size=8)
    | st.integers(-5, 2**70).map(str)
    | st.sampled_from(["", " ", "0", "1", "2", "²", "٣", "1_0", "+1", "gpu[1-2]", "h0 h1"])
)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.sampled_from(LIGHTNING_INT_NAMES), ENV_TEXT, st.booleans())
def test_any_launcher_value_passes_or_is_refused_by_name_in_one_line(name, value, drop):
    """Whatever text a variable holds (or its absence): accepted, or one line naming it."""
    env = {**SRUN_TASK, "SLURM_CPUS_ON_NODE": "2"}
    env.pop(name, None) if drop else env.update({name: value})
    try:
        check(env)
    except UsageError as error:
        text = str(error)
        assert "\n" not in text
        assert drop or name in text, text
        return
    if not drop and name in LIGHTNING_INT_NAMES[:8]:
        assert int(value) == int(value.strip())  # an accepted number is the one Lightning reads


# --- the rendezvous: resolved, and refused at once when it cannot succeed ------------------


def listening() -> socket.socket:
    """A socket listening on a free local port."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def rendezvous(env: dict[str, str], *argv: str) -> None:
    launcher.validate(cfg("--devices", "2", "--timeout", "1", *argv), launcher.detect(env), env)


def test_unresolvable_master_addr_is_refused():
    for rank in ("0", "1"):
        env = {
            **SRUN_TASK,
            "SLURM_PROCID": rank,
            "SLURM_LOCALID": rank,
            "MASTER_ADDR": "no-such-host.invalid",
            "MASTER_PORT": "29999",
        }
        with pytest.raises(
            UsageError,
            match=r"MASTER_ADDR='no-such-host.invalid' cannot be"
            r" resolved",
        ):
            rendezvous(env)
    with pytest.raises(
        UsageError,
        match=r"rank 0's host 'gpu003' \(the first of SLURM_NODELIST\)"
        r" cannot be resolved",
    ):
        rendezvous(SRUN_TASK)


def test_rank_zero_refuses_a_port_in_use_and_an_address_not_its_own():
    with listening() as busy:
        port = str(busy.getsockname()[1])
        env = {
            **SRUN_TASK,
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        with pytest.raises(UsageError, match=rf"MASTER_PORT={port} is already in use on this host"):
            rendezvous(env)
        with pytest.raises(UsageError, match=rf"MASTER_PORT={port} is already in use"):
            rendezvous({"MASTER_PORT": port})  # a plain start: Lightning would listen there
    env["MASTER_ADDR"] = "192.0.2.1"  # TEST-NET-1: never an address of this host
    with pytest.raises(UsageError, match=r"MASTER_ADDR='192.0.2.1' is not an address of this host"):
        rendezvous(env)
    env["MASTER_ADDR"] = "127.0.0.1"
    rendezvous(env)  # the port is free again


def test_other_ranks_refuse_when_nothing_listens_and_join_when_something_does():
    with listening() as rank0:
        port = str(rank0.getsockname()[1])
        env = {**SRUN_TASK, "MASTER_ADDR": "localhost", "MASTER_PORT": port}
        rendezvous(env)
        torchrun = {
            **TORCHRUN,
            "MASTER_PORT": port,
            "RANK": "0",
            "LOCAL_RANK": "0",
            "TORCHELASTIC_USE_AGENT_STORE": "True",
        }
        rendezvous(torchrun)  # torchrun's agent hosts the store: rank 0 joins it too
    with pytest.raises(
        UsageError,
        match=rf"nothing listens at MASTER_ADDR='localhost' port {port}"
        r" after 1 s",
    ):
        rendezvous(env)


def test_ranks_started_by_a_runner_or_lightning_are_left_to_their_parent():
    self_child = {**TORCHRUN, "DDPBENCH_SELF_LAUNCHED": "1", "MASTER_PORT": "1"}
    del self_child["TORCHELASTIC_RUN_ID"]
    rendezvous(self_child)  # nothing listens at port 1, and that is the parent's to see
    rendezvous({**PLAIN_LIGHTNING_CHILD, "MASTER_PORT": "1"})


# --- native's launch: one parse and one preflight per process; a launcher's rank starts nobody --

LAUNCHER_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")


@pytest.fixture
def native_main(monkeypatch):
    """native.launch.main with the calls it makes recorded: each preflight.check (its Plan),
    each launch_ranks and each rank's run (what it was handed); neither trains nor starts."""
    from common import preflight
    from native import benchmark, launch

    for name in list(os.environ):
        if name.startswith(("SLURM_", "TORCHELASTIC_", "DDPBENCH_")) or name in (
            *LAUNCHER_NAMES,
            "MASTER_ADDR",
            "MASTER_PORT",
        ):
            monkeypatch.delenv(name)
    calls: dict[str, list] = {"check": [], "launch_ranks": [], "run": []}
    real_check = preflight.check

    def check(*args, **kwargs):
        plan = real_check(*args, **kwargs)
        calls["check"].append(plan)
        return plan

    monkeypatch.setattr(preflight, "check", check)
    monkeypatch.setattr(
        launch, "launch_ranks", lambda *args: calls["launch_ranks"].append(args) or 0
    )
    monkeypatch.setattr(
        benchmark,
        "run",
        lambda cfg, launch_, prec, threads, argv: (
            calls["run"].append((cfg, launch_, prec, threads, argv)) or 0
        ),
    )
    return launch.main, calls


def test_a_one_device_run_is_checked_once_and_trains_with_that_plan(native_main):
    main, calls = native_main
    argv = ["--accelerator", "cpu", "--steps", "3"]
    assert main(argv) == 0
    [plan] = calls["check"]
    [(cfg, launch_, prec, threads, argv_)] = calls["run"]
    assert (launch_, prec, threads, argv_) == (plan.launch, plan.precision, plan.threads, argv)
    assert cfg.steps == 3 and calls["launch_ranks"] == []


def test_a_self_launching_parent_is_checked_once_and_starts_the_ranks(native_main):
    main, calls = native_main
    argv = ["--accelerator", "cpu", "--devices", "2", "--oversubscribe-cpus"]
    assert main(argv) == 0
    assert len(calls["check"]) == 1 and calls["run"] == []
    assert calls["launch_ranks"] == [("native", "native", argv, 2)]


def test_a_rank_of_torchrun_is_checked_once_and_starts_nobody(native_main, monkeypatch):
    """The launcher's environment makes this process one rank: it trains, it does not spawn."""
    main, calls = native_main
    with listening() as rank0:
        env = {**TORCHRUN, "MASTER_PORT": str(rank0.getsockname()[1])}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert main(["--accelerator", "cpu", "--devices", "2", "--oversubscribe-cpus"]) == 0
    [plan] = calls["check"]
    [(_, launch_, *_)] = calls["run"]
    assert calls["launch_ranks"] == [] and launch_ is plan.launch
    assert (launch_.kind, launch_.rank, launch_.world_size) == ("torchrun", 1, 2)


def test_check_checks_once_and_neither_trains_nor_launches(native_main, capsys):
    main, calls = native_main
    assert main(["--accelerator", "cpu", "--devices", "2", "--oversubscribe-cpus", "--check"]) == 0
    assert len(calls["check"]) == 1 and calls["run"] == calls["launch_ranks"] == []
    assert capsys.readouterr().out.startswith("native: check passed: 2 rank(s) via self")


@needs_lightning
@pytest.mark.parametrize("module", ["lightning_impl.fabric", "lightning_impl.trainer"])
@pytest.mark.parametrize("check", [False, True])
def test_a_lightning_runner_checks_once_in_its_process(module, check, native_main, monkeypatch):
    """Each Lightning runner parses and checks in its own main(), once, and hands the plan on."""
    import importlib

    from common import lifetime

    runner = importlib.import_module(module)
    _, calls = native_main  # counts preflight.check; the environment without launcher variables
    # become_launcher sets it: unset now, and unset again after the test
    monkeypatch.setenv(lifetime.LAUNCHER_PID_VAR, "")
    monkeypatch.delenv(lifetime.LAUNCHER_PID_VAR)
    ran = []
    monkeypatch.setattr(runner, "run", lambda *args: ran.append(args) or 0)
    assert runner.main(["--accelerator", "cpu", *(["--check"] if check else [])]) == 0
    [plan] = calls["check"]
    if check:
        assert ran == []
    else:
        [(cfg, launch_, prec, threads, _)] = ran
        assert (launch_, prec, threads) == (plan.launch, plan.precision, plan.threads)
        assert cfg.accelerator == "cpu" and not cfg.check


COUNT_CHECKS = """
import os
from common import preflight

_real = preflight.check


def _counted(*args, **kwargs):
    with open(os.path.join({folder!r}, str(os.getpid())), "a") as f:
        f.write("check\\n")
    return _real(*args, **kwargs)


preflight.check = _counted
"""


@pytest.mark.slow
def test_every_process_of_a_self_launched_run_checks_once(tmp_path):
    """Subprocesses: the parent and each rank it starts run preflight.check exactly once."""
    from conftest import TINY, clean_env, run_module

    hook, counts = tmp_path / "hook", tmp_path / "counts"
    hook.mkdir()
    counts.mkdir()
    (hook / "sitecustomize.py").write_text(COUNT_CHECKS.format(folder=str(counts)))
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([str(hook), env["PYTHONPATH"]])
    proc = run_module("native", [*TINY, "--devices", "2"], env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    per_process = {p.name: p.read_text().count("check") for p in counts.iterdir()}
    assert len(per_process) == 3 and set(per_process.values()) == {1}, per_process
