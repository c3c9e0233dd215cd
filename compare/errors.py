"""Errors a user can cause (a mismatch of runs, an output path): one line, exit status 2.

`common.result.ResultError` covers unreadable or invalid result files and manifests; both are
`common.errors.UsageError`s, which `exit_on_usage_error` turns into that line.
"""

from common.errors import UsageError


class CompareError(UsageError):
    """A mistake the user can fix; the message says what and how."""


class WorkloadMismatch(CompareError):
    """The runs do not measure the same workload (beyond the world size)."""
