"""Measurement tools beside the runners; each runs as `python -m benchmarks.NAME`.

    minimal_loop   the smallest hand-written loop doing the runners' work (is the harness free?)
    host_profile   compares two --pyprofile dumps: where each runner's host time per step goes
    trace_gaps     summarises one or two --trace files: where and why the GPU waits

Importing this package imports nothing; each tool imports what it needs (torch only in
minimal_loop), so the analysis tools also run where torch is not installed.
"""
