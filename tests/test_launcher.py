"""Launcher detection and the mismatches both runners reject before any process group."""

from __future__ import annotations

import pytest

from common import config, launcher
from common.errors import UsageError


def cfg(*argv: str) -> config.BenchConfig:
    return config.parse(["--accelerator", "cpu", *argv], prog="test")


SRUN_TASK = {"SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "2", "SLURM_NNODES": "1", "SLURM_PROCID": "1",
             "SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "4321",
             "SLURM_JOB_NAME": "bench", "SLURM_NODELIST": "gpu[003-004]"}


def test_slurm_task_is_detected_with_its_rank_and_first_host():
    launch = launcher.detect(SRUN_TASK)
    assert (launch.kind, launch.rank, launch.local_rank, launch.world_size) == ("slurm", 1, 1, 2)
    assert launch.master_addr == "gpu003"
    assert launch.master_port == 15000 + 4321  # Lightning's rule when MASTER_PORT is unset
    assert launch.slurm["SLURM_JOB_ID"] == "4321"


def test_master_port_from_environment_wins():
    assert launcher.detect({**SRUN_TASK, "MASTER_PORT": "29400"}).master_port == 29400


@pytest.mark.parametrize("nodelist,first", [("node1", "node1"), ("a,b,c", "a"), ("gpu[7]", "gpu7"),
                                            ("gpu[003-004,007],x1", "gpu003"), ("h0 h1", "h0")])
def test_first_host_of_a_nodelist(nodelist, first):
    assert launcher.first_host(nodelist) == first


def test_interactive_job_named_bash_is_not_slurm_as_in_lightning():
    assert launcher.detect({**SRUN_TASK, "SLURM_JOB_NAME": "bash"}).kind == "self"


def test_torchrun_wins_over_slurm():
    env = {**SRUN_TASK, "TORCHELASTIC_RUN_ID": "x", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert launcher.detect(env).kind == "torchrun"


def test_plain_python_is_the_self_launching_parent():
    launch = launcher.detect({})
    assert launch.kind == "self" and not launch.is_child


def test_slurm_tasks_per_node_must_equal_devices():
    with pytest.raises(UsageError, match=r"Slurm runs 2 tasks per node .* but --devices is 1; set --devices 2"):
        launcher.validate(cfg("--devices", "1"), launcher.detect(SRUN_TASK), SRUN_TASK)


def test_slurm_nodes_must_equal_num_nodes():
    env = {**SRUN_TASK, "SLURM_NNODES": "2", "SLURM_NTASKS": "4"}
    with pytest.raises(UsageError, match=r"Slurm allocated 2 nodes .* --num-nodes is 1"):
        launcher.validate(cfg("--devices", "2"), launcher.detect(env), env)


def test_batch_script_without_srun_is_refused_instead_of_hanging():
    env = {k: v for k, v in SRUN_TASK.items() if k != "SLURM_STEP_ID"} | {"SLURM_PROCID": "0", "SLURM_LOCALID": "0"}
    with pytest.raises(UsageError, match=r"not started by srun; start it with `srun python -m"):
        launcher.validate(cfg("--devices", "2"), launcher.detect(env), env)


def test_matching_slurm_task_passes():
    launcher.validate(cfg("--devices", "2"), launcher.detect(SRUN_TASK), SRUN_TASK)


def test_torchrun_world_size_must_match_devices_times_nodes():
    env = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    with pytest.raises(UsageError, match=r"torchrun started WORLD_SIZE=4 processes but --devices 2 x --num-nodes 1"):
        launcher.validate(cfg("--devices", "2"), launcher.detect(env), env)


def test_self_launch_cannot_span_nodes():
    with pytest.raises(UsageError, match=r"--num-nodes 2 needs a launcher on every node"):
        launcher.validate(cfg("--num-nodes", "2"), launcher.detect({}), {})


def test_incomplete_launcher_environment_is_named():
    env = {"TORCHELASTIC_RUN_ID": "x", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1"}
    with pytest.raises(UsageError, match=r"RANK is not set"):
        launcher.detect(env)


TORCHRUN = {"TORCHELASTIC_RUN_ID": "x", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def test_matching_torchrun_rank_passes():
    launcher.validate(cfg("--devices", "2"), launcher.detect(TORCHRUN), TORCHRUN)


@pytest.mark.parametrize("change,message", [
    ({"RANK": "2"}, r"RANK=2 is outside 0..1 \(WORLD_SIZE=2\); a rank outside the world would wait"),
    ({"RANK": "-1"}, r"RANK=-1 is outside 0..1"),
    ({"LOCAL_RANK": "-1"}, r"LOCAL_RANK=-1 is outside 0..1 \(LOCAL_WORLD_SIZE=2\)"),
    ({"LOCAL_RANK": "2", "RANK": "1"}, r"LOCAL_RANK=2 is outside 0..1"),
    ({"RANK": "0"}, r"RANK=0 does not match GROUP_RANK=0 x LOCAL_WORLD_SIZE=2 \+ LOCAL_RANK=1 = 1"),
    ({"GROUP_RANK": "1"}, r"GROUP_RANK=1 is outside 0..0 \(--num-nodes=1\)"),
    ({"MASTER_PORT": "99999"}, r"MASTER_PORT='99999' is not a TCP port; use a number in 1..65535"),
    ({"MASTER_PORT": "0"}, r"MASTER_PORT='0' is not a TCP port"),
    ({"MASTER_PORT": "1_0"}, r"MASTER_PORT='1_0' is not a whole number"),
    ({"MASTER_ADDR": ""}, r"MASTER_ADDR='' is not a host name"),
])
def test_torchrun_variables_out_of_range_are_refused(change, message):
    env = {**TORCHRUN, **change}
    with pytest.raises(UsageError, match=message):
        launcher.validate(cfg("--devices", "2"), launcher.detect(env), env)


def test_second_node_rank_must_follow_torchruns_numbering():
    env = {**TORCHRUN, "WORLD_SIZE": "4", "GROUP_RANK": "1", "RANK": "3"}
    launcher.validate(cfg("--devices", "2", "--num-nodes", "2"), launcher.detect(env), env)
    env["RANK"] = "1"
    with pytest.raises(UsageError, match=r"RANK=1 does not match GROUP_RANK=1 x LOCAL_WORLD_SIZE=2"):
        launcher.validate(cfg("--devices", "2", "--num-nodes", "2"), launcher.detect(env), env)


@pytest.mark.parametrize("change,message", [
    ({"SLURM_PROCID": "2"}, r"SLURM_PROCID=2 is outside 0..1 \(SLURM_NTASKS=2\)"),
    ({"SLURM_LOCALID": "-1"}, r"SLURM_LOCALID=-1 is outside 0..1"),
    ({"SLURM_NODEID": "1"}, r"SLURM_NODEID=1 is outside 0..0 \(--num-nodes=1\)"),
    ({"MASTER_PORT": "70000"}, r"MASTER_PORT='70000' is not a TCP port"),
])
def test_slurm_variables_out_of_range_are_refused(change, message):
    env = {**SRUN_TASK, **change}
    with pytest.raises(UsageError, match=message):
        launcher.validate(cfg("--devices", "2"), launcher.detect(env), env)


def test_slurm_derived_port_is_always_a_port():
    for job_id in ("1", "9999", "123456789", "job_x"):
        assert 1 <= launcher.detect({**SRUN_TASK, "SLURM_JOB_ID": job_id}).master_port <= 65535


@pytest.mark.parametrize("env,message", [
    ({"LOCAL_RANK": "0"}, r"LOCAL_RANK=0 is set but neither torchrun nor srun started this process"),
    ({"NODE_RANK": "3"}, r"NODE_RANK=3 is outside 0..0"),
    ({"MASTER_PORT": "65536"}, r"MASTER_PORT='65536' is not a TCP port"),
])
def test_stray_launcher_variables_in_a_plain_start_are_refused(env, message):
    """Lightning reads these in a plain start (and would wait for peers); both runners refuse."""
    with pytest.raises(UsageError, match=message):
        launcher.validate(cfg("--devices", "2"), launcher.detect(env), env)


def test_lightnings_own_children_pass_the_plain_checks():
    env = {"LOCAL_RANK": "1", "NODE_RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "12910"}
    launcher.validate(cfg("--devices", "2"), launcher.detect(env), env)


def test_cpu_ranks_beyond_the_affinity_are_refused_unless_forced(monkeypatch):
    monkeypatch.setattr(launcher.os, "sched_getaffinity", lambda pid: {0, 1})
    launcher.validate(cfg("--devices", "2"), launcher.detect({}), {})
    with pytest.raises(UsageError, match=r"--devices 3 runs 3 ranks on this node but this process may use 2"
                                         r" CPU\(s\) \(its CPU affinity\); use --devices 2 or fewer, or add"
                                         r" --oversubscribe-cpus"):
        launcher.validate(cfg("--devices", "3"), launcher.detect({}), {})
    launcher.validate(cfg("--devices", "3", "--oversubscribe-cpus"), launcher.detect({}), {})


def test_cpu_ranks_under_srun_are_bounded_by_the_jobs_cpus_on_the_node(monkeypatch):
    """Each srun task may be bound to one CPU: its own affinity is not the node's budget."""
    monkeypatch.setattr(launcher.os, "sched_getaffinity", lambda pid: {0})
    env = {**SRUN_TASK, "SLURM_CPUS_ON_NODE": "2"}
    launcher.validate(cfg("--devices", "2"), launcher.detect(env), env)
    env = {**SRUN_TASK, "SLURM_CPUS_ON_NODE": "1"}
    with pytest.raises(UsageError, match=r"the job has 1 CPU\(s\) on this node \(SLURM_CPUS_ON_NODE\);"
                                         r" ask for more CPUs \(--cpus-per-task\)"):
        launcher.validate(cfg("--devices", "2"), launcher.detect(env), env)
