"""User-facing errors: one line, exit status 2, no traceback unless --verbose.

from common.errors import UsageError, exit_on_usage_error
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import traceback
from collections.abc import Iterator
from typing import NoReturn

EXIT_USAGE = 2  # the one exit status for a mistake the user can fix


class UsageError(Exception):
    """A mistake the user can fix: the message names the flag or variable and the fix."""


def one_line(text: str) -> str:
    """`text` with newlines and other control characters escaped, so an error stays one line
    whatever a path or a variable held (a file name may contain a newline)."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
        for c in text
    )


@contextlib.contextmanager
def exit_on_usage_error(prog: str, verbose: bool = False) -> Iterator[None]:
    """Turn a UsageError into one line on stderr and exit status 2 (a traceback too if verbose).

    Every command uses it: the runners, compare and the experiment (`ResultError`, compare's
    `CompareError` and `OutputError` are UsageErrors)."""
    try:
        yield
    except UsageError as error:
        if verbose:
            traceback.print_exc()
        print(f"{prog}: error: {one_line(str(error))}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_USAGE) from None


class ResultError(UsageError):
    """A result file that cannot be read or does not match the schema (names file and field)."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line and exit status 2, instead of usage + error.

    The runners' shared parser, compare and the experiment command all use it.
    """

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {one_line(message)} (see --help)", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_USAGE)
