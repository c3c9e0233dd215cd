"""common/gpus.py: the driver is asked once per process and GPU visibility, in a child; a fork
server asks before it forks, so its runs start with the answer (no driver start per run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import ROOT, clean_env

from experiment import launch

# Run by the server: what its runs inherit of the driver's answer, before and after asking.
PROGRAM = """
import json, sys
gpus = sys.modules["common.gpus"]  # imported by the server, not by this program
before = gpus._asked.cache_info()
answer = gpus.cuda_capabilities()
after = gpus._asked.cache_info()
print(json.dumps({"cached": before.currsize, "hits": after.hits - before.hits,
                  "asked": after.misses - before.misses, "answer": answer}))
"""


def test_a_forked_run_inherits_the_servers_answer_for_its_gpu_visibility(tmp_path: Path):
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    env = clean_env(PYTHONPATH=str(ROOT))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    server = launch.ForkServer(sys.executable, env, [], tmp_path / "server.log")
    try:
        server.ready()
        seen = []
        for k, visible in enumerate((None, "", None)):
            run_env = dict(env) if visible is None else {**env, "CUDA_VISIBLE_DEVICES": visible}
            log = tmp_path / f"run-{k}.log"
            assert server.start(str(program), [], run_env, log).wait(60) == 0, log.read_text()
            seen.append(json.loads(log.read_text().splitlines()[-1]))
    finally:
        server.close()
    same, hidden, again = seen
    assert (same["cached"], same["hits"], same["asked"]) == (1, 1, 0)  # the server's answer
    assert (hidden["hits"], hidden["asked"]) == (0, 1)  # other GPUs visible: asked anew
    assert hidden["answer"] is None  # CUDA_VISIBLE_DEVICES="" hides every GPU
    assert again == same  # each run starts from the server's state, not the last run's
