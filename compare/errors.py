"""Errors a user can cause (a mismatch of runs, an output path): one line, exit status 2.

`common.result.ResultError` covers unreadable or invalid result files.
"""


class CompareError(Exception):
    """A mistake the user can fix; the message says what and how."""


class WorkloadMismatch(CompareError):
    """The runs do not measure the same workload (beyond the world size)."""
