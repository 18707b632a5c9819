"""The one adapter between options classes (`albert_tf.tasks.options`) and absl flags:
the scripts' flags are made from the classes' fields, and a run's options filled from
the parsed flags.

    define_flags(ClassificationTask.Options, MultiLabelTask.Options, omit=("tpu",))
    options = from_flags(MultiLabelTask.Options)

`define_flags` defines a flag per field (its type, default, help and choices), once: a
field another class (or the script) already made a flag of must have its type; the
first class given sets a shared flag's default and help, which is how a script keeps its
original defaults. `from_flags` gives the options of one class from the parsed flags: a
field that is no flag of the script takes its default, and a flag given on the command
line that the class has no field for (another task's) is an error, not ignored.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from absl import flags

from albert_tf.errors import UsageError
from albert_tf.tasks.options import Options, OptionsError

__all__ = ["OptionsError", "define_flags", "flag_values", "from_flags"]

_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
           float: flags.DEFINE_float, str: flags.DEFINE_string, tuple: flags.DEFINE_list}
_PARSERS = {bool: "BooleanParser", int: "IntegerParser", float: "FloatParser",
            tuple: "ListParser"}


# Every flag defined here in this process (a script's): `from_flags` names those given
# that a run's options have no field for.
_DEFINED: list[str] = []


def define_flags(*classes: type[Options], omit: Iterable[str] = (),
                 only: Iterable[str] | None = None,
                 helps: Mapping[str, str] | None = None,
                 keep_others: bool = False) -> list[str]:
    """Defines a flag for each field of `classes` that is not one yet (not those in
    `omit`; with `only`, those alone; `helps`: a script's own words for some); returns
    the names of the flags defined. A flag of the field's name and another type is an
    `OptionsError`, or with `keep_others` left as it is (the field is no flag then)."""
    omit, only, helps = set(omit), (set(only) if only is not None else None), helps or {}
    defined = []
    for cls in classes:
        for field in cls.flag_fields():
            name = field.name
            if name in omit or (only is not None and name not in only):
                continue
            kind, _ = cls.type_of(name)
            if kind is None:
                raise TypeError(f"{cls.__qualname__}.{name}: a flag's type is bool, int, "
                                "float, str or tuple[str, ...] (or that | None)")
            if name in flags.FLAGS:
                if not (_same_kind(name, kind) or keep_others):
                    raise OptionsError(
                        f"{cls.__qualname__}.{name} is a {kind.__name__} option, but the "
                        f"flag --{name} is already defined with another type")
                continue
            choices = field.metadata.get("choices")
            help_text = helps.get(name) or cls.help_of(name)
            if choices:
                flags.DEFINE_enum(name, field.default, list(choices), help_text)
            else:
                default = field.default
                if kind is tuple and default is not None:
                    default = list(default)
                _DEFINE[kind](name, default, help_text)
            defined.append(name)
    _DEFINED.extend(defined)
    return defined


def _same_kind(name: str, kind: type | None) -> bool:
    """Whether the flag `name` holds values of the type `kind`."""
    parser = type(flags.FLAGS[name].parser).__name__
    return kind is not None and parser in ((_PARSERS[kind],) if kind in _PARSERS else
                                           ("ArgumentParser", "EnumParser"))


def flag_values(cls: type[Options]) -> dict:
    """The values of the flags that are fields of `cls` (of the field's type)."""
    return {field.name: flags.FLAGS[field.name].value for field in cls.flag_fields()
            if field.name in flags.FLAGS and _same_kind(field.name,
                                                        cls.type_of(field.name)[0])}


def from_flags(cls: type[Options], what: str = ""):
    """The options of `cls` from the parsed flags (a field that is no flag takes its
    default). A flag defined here and given on the command line that `cls` has no field
    for is a `UsageError` (`what`: whose options `cls` are)."""
    names = set(cls.names())
    given = sorted({name for name in _DEFINED
                    if name not in names and flags.FLAGS[name].present})
    if given:
        raise UsageError(f"{', '.join('--' + name for name in given)}: not an option of "
                         f"{what or cls.__qualname__}")
    return cls.build(flag_values(cls))
