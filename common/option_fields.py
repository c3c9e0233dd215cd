"""Options declared on a dataclass's fields: each field is also a command-line flag.

    @dataclass(frozen=True)
    class ChunkOptions:
        chunk_steps: int = option(10, CHUNKS, "timed steps per chunk", metavar="N",
                                  at_least="positive", at_most=MAX_COUNT)

    add_options(parser, ChunkOptions)          # one argparse group per `Group`, in field order
    opts = from_args(ChunkOptions, namespace)  # the dataclass from the parsed namespace
    check_bounds(opts)                         # UsageError naming the flag

- `Group(title, description, exclusive=True)`: the group's options exclude each other.
- The flag is the field's name with dashes; the type comes from the annotation (`int`,
  `float`, `str`, `Path`, optional or not); a `bool` is `--x/--no-x`, or with `switch=True`
  a plain `--x` that is off by default. `parse=` gives argparse another converter.
- A field whose default is None says its own default in its help ("(default: none)");
  every other help gets argparse's "(default: ...)".
- `at_least` ("positive" or "not negative") and `at_most` bound a number; floats must be
  finite. Checks across fields stay in code (common.config's `validate`).

BenchConfig (common/config.py), a workload's options (common/workloads), compare's and an
experiment's options are all declared this way. No torch, no workload: every package reads it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from common.errors import UsageError

# Largest value of a count or size option: beyond it torch's C++ sizes overflow (and no run
# could finish); a mistake caught here instead of a traceback in every rank.
MAX_COUNT = 2**31 - 1

OPTION = "option"  # the key of a field's metadata that holds its `Option`
Bound = Literal["positive", "not negative"]


@dataclass(frozen=True)
class Group:
    """An argument group of the help: title, a paragraph under it, and whether its options
    exclude each other (argparse's mutually exclusive group: at most one may be given).
    Without a title, the options join the parser's own section, under --help."""

    title: str | None
    description: str | None = None
    exclusive: bool = False


@dataclass(frozen=True)
class Option:
    """How one dataclass field is an option: what `option()` was given."""

    group: Group
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    parse: Callable[[str], Any] | None = None
    switch: bool = False
    at_least: Bound | None = None
    at_most: float | None = None


def option(default: Any, group: Group, help: str, **how: Any) -> Any:
    """A dataclass field that is also a command-line option (see the module docstring); `how`
    gives Option's other fields by name (metavar, choices, parse, switch, at_least, at_most)."""
    return dataclasses.field(default=default, metadata={OPTION: Option(group, help, **how)})


def flag(name: str) -> str:
    """The option of a field: `--` and the name with dashes."""
    return "--" + name.replace("_", "-")


def option_fields(cls: type) -> list[tuple[dataclasses.Field, Option]]:
    """The fields of `cls` declared with `option()`, in declaration order."""
    return [(f, f.metadata[OPTION]) for f in dataclasses.fields(cls) if OPTION in f.metadata]


def value_type(hint: Any) -> type:
    """A field's annotation without its `| None`."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def add_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add every `option()` field of `cls` to `parser`, one argument group per `Group`, the
    groups and their options in the order of the fields."""
    groups: dict[Group, Any] = {}
    hints = typing.get_type_hints(cls)
    for field, spec in option_fields(cls):
        if spec.group not in groups:
            group = (
                parser  # no title: the parser's own section
                if spec.group.title is None
                else parser.add_argument_group(spec.group.title, spec.group.description)
            )
            groups[spec.group] = (
                group.add_mutually_exclusive_group() if spec.group.exclusive else group
            )
        kind = value_type(hints[field.name])
        # "%(default).0s" prints nothing: it only stops argparse adding "(default: None)"
        text = spec.help + ("%(default).0s" if field.default is None else "")
        kwargs: dict[str, Any] = {"default": field.default, "help": text}
        if kind is bool:
            kwargs["action"] = "store_true" if spec.switch else argparse.BooleanOptionalAction
        else:
            if spec.parse is not None or kind is not str:
                kwargs["type"] = spec.parse or kind
            if spec.choices is not None:
                kwargs["choices"] = spec.choices
            if spec.metavar is not None:
                kwargs["metavar"] = spec.metavar
        groups[spec.group].add_argument(flag(field.name), **kwargs)


def from_args(cls: type, namespace: argparse.Namespace, **values: Any) -> Any:
    """An instance of `cls` from a namespace `add_options(..., cls)` parsed; `values` win."""
    given = {f.name: getattr(namespace, f.name) for f, _ in option_fields(cls)}
    return cls(**{**given, **values})


def check_bounds(obj: Any) -> None:
    """UsageError for the first option of `obj` (in field order) outside its bounds: a float
    that is not finite, a value above `at_most`, or one below `at_least`."""
    for field, spec in option_fields(type(obj)):
        value = getattr(obj, field.name)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        name = flag(field.name)
        if isinstance(value, float) and not math.isfinite(value):  # argparse's float takes nan
            raise UsageError(f"{name} must be a finite number, got {value}")
        if spec.at_most is not None and value > spec.at_most:
            limit = _show(spec.at_most)
            raise UsageError(f"{name} {_show(value)} is too large; use at most {limit}")
        if spec.at_least == "positive" and value <= 0:
            raise UsageError(f"{name} must be positive, got {_show(value)}")
        if spec.at_least == "not negative" and value < 0:
            raise UsageError(f"{name} must be 0 or more, got {_show(value)}")


def _show(value: float) -> str:
    """A number as typed: ints exactly (%g would overflow on a huge one), floats by %g."""
    return str(value) if isinstance(value, int) else f"{value:g}"
