"""One paired experiment, one folder: `python -m experiment --arms native,lightning -- OPTIONS`.

Runs each arm (a runner) in a fresh process per run, interleaved in ABBA blocks, and leaves
results/, logs/, manifest.json and compare's report in one folder. Imports neither torch nor
Lightning: the runners are started as processes.
"""
