"""A run's options, typed: a frozen dataclass built once from a script's flags.

    options = typed_options(options, FLAG_NAMES, exclusive=[("high_only", "middle_only")])

Its fields are the flags the script defines (`absl` gives each its type, default and
allowed values) plus the values the run derives before any work (`DERIVED`). Built from
a mapping (the parsed flags, or a dict given from Python), it names before any work:

- an option that is no flag of the script (with the closest names);
- a value of the wrong type (a string for an integer flag, ...) or outside an enum;
- two options given together that exclude each other.

An option left out takes the flag's default, as on the command line. The object reads
as a read-only mapping too (`options["max_seq_length"]`), and `replace` gives a changed
copy, checked again.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
from typing import Any, Iterable, Mapping

from absl import flags

from albert_tf.errors import UserError

# Options a run derives from its flags before any work, with their defaults:
# `init_files`, the --init_checkpoint described once (`release.ReleaseFiles`: its layout
# and files; `model_files.complete_model_files`), then read by the config and the load.
DERIVED = {"init_files": None}


class OptionsError(UserError):
    """Options that cannot make a run: reported before any work."""


class Options(collections.abc.Mapping):
    """Base of the generated classes: a mapping view of the fields."""

    _exclusive: tuple[tuple[str, str], ...] = ()

    def __getitem__(self, name: str) -> Any:
        if name not in self._fields():
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self):
        return iter(self._fields())

    def __len__(self) -> int:
        return len(self._fields())

    @classmethod
    def _fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def replace(self, **changes) -> Options:
        return build({**self, **changes}, type(self))

    def __post_init__(self):
        for a, b in self._exclusive:
            if getattr(self, a) and getattr(self, b):
                raise OptionsError(f"--{a} and --{b} exclude each other")


# The Python type of a flag's value, by its absl parser (a flag with no default may be
# None).
_TYPES = {"IntegerParser": int, "FloatParser": float, "BooleanParser": bool,
          "ListParser": list[str]}


def _type(flag):
    """The annotation of a flag's field: its value's type, or None."""
    return _TYPES.get(type(flag.parser).__name__, str) | None


def _checker(flag):
    """check(value) -> what was expected, or None where the value fits: for an absl
    flag."""
    kind = type(flag.parser).__name__
    enum = getattr(flag.parser, "enum_values", None)

    def check(value):
        if value is None:
            return None
        if enum is not None:
            return None if value in enum else f"one of {', '.join(map(str, enum))}"
        if kind == "IntegerParser":
            return None if isinstance(value, int) and not isinstance(value, bool) \
                else "an integer"
        if kind == "FloatParser":
            return None if isinstance(value, (int, float)) and not isinstance(value, bool) \
                else "a number"
        if kind == "BooleanParser":
            return None if isinstance(value, bool) else "true or false"
        if kind == "ListParser":
            return None if isinstance(value, (list, tuple)) and all(
                isinstance(v, str) for v in value) else "a list of strings"
        return None if isinstance(value, str) else "a string"
    return check


def options_class(flag_names: Iterable[str], *,
                  exclusive: Iterable[tuple[str, str]] = ()) -> type[Options]:
    """The frozen dataclass of the flags `flag_names` (defined with absl) and `DERIVED`."""
    defined = flags.FLAGS
    fields = [(name, _type(defined[name]), dataclasses.field(default=defined[name].default))
              for name in flag_names]
    fields += [(name, Any, dataclasses.field(default=value))
               for name, value in DERIVED.items() if name not in set(flag_names)]
    cls = dataclasses.make_dataclass("RunOptions", fields, bases=(Options,), frozen=True,
                                     eq=True)
    cls._exclusive = tuple(exclusive)
    cls._checks = {name: _checker(defined[name]) for name in flag_names}
    return cls


def build(values: Mapping[str, Any], cls: type[Options]) -> Options:
    """`values` as `cls` (see the module's docstring); `OptionsError` names what is
    wrong."""
    if isinstance(values, cls):
        return values
    known = cls._fields()
    unknown = [name for name in values if name not in known]
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, known, n=1)
            hints.append(f"{name}" + (f" (did you mean {close[0]}?)" if close else ""))
        raise OptionsError(f"unknown option(s): {', '.join(hints)}")
    for name, value in values.items():
        check = cls._checks.get(name)
        problem = check(value) if check else None
        if problem:
            raise OptionsError(f"--{name}={value!r}: expected {problem}")
    return cls(**values)


def typed_options(options, flag_names, *, exclusive=()) -> Options:
    """The run's options as a frozen dataclass of the script's flags: unknown options,
    values of the wrong type and options that exclude each other are named before any
    work; options left out take the flags' defaults."""
    return build(options, options_class(flag_names, exclusive=exclusive))
