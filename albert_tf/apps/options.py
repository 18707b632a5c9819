"""The one adapter between options classes (`albert_tf.tasks.options`) and absl flags:
the scripts' flags are made from the classes' fields, and a run's options filled from
the parsed flags.

    define_flags(ClassificationTask.Options, MultiLabelTask.Options, omit=("tpu",))
    options = from_flags(MultiLabelTask.Options)

`define_flags` defines a flag per field (its type, default, help and choices), once: a
field another class (or the script) already made a flag of must have its type. Each
default is defined once, by the options class: a flag shows its field's default, and a
flag shared by classes whose defaults differ shows none and names each class's in its
help. `from_flags` gives the options of one class from the flags given on the command
line, every other field its class's default: a script run and a Python run of the same
settings build the same options. A flag given on the command line that the class has no
field for (another task's) is an error, not ignored.
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
                 keep_others: bool = False,
                 labels: Mapping[type, str] | None = None) -> list[str]:
    """Defines a flag for each field of `classes` that is not one yet (not those in
    `omit`; with `only`, those alone; `helps`: a script's own words for some); returns
    the names of the flags defined. A field whose default differs between `classes`
    gives a flag of no default whose help names each class's (`labels`: how to call a
    class there; default its name). A flag of the field's name and another type is an
    `OptionsError`, or with `keep_others` left as it is (the field is no flag then)."""
    omit, only, helps = set(omit), (set(only) if only is not None else None), helps or {}
    differing = _differing_defaults(classes, labels or {})
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
            default = field.default
            if name in differing:
                default = None
                help_text = f"{help_text} Default by task: {differing[name]}."
            if choices:
                flags.DEFINE_enum(name, default, list(choices), help_text)
            else:
                if kind is tuple and default is not None:
                    default = list(default)
                _DEFINE[kind](name, default, help_text)
            defined.append(name)
    _DEFINED.extend(defined)
    return defined


def _differing_defaults(classes, labels: Mapping[type, str]) -> dict[str, str]:
    """Flag name -> the defaults of `classes` for it, named (`1000 (classification,
    multi_label); none (squad)`), for the fields whose default is not the same in
    every class that has them."""
    defaults: dict[str, dict] = {}
    for cls in classes:
        for field in cls.flag_fields():
            defaults.setdefault(field.name, {}).setdefault(
                _shown(field.default), []).append(labels.get(cls, cls.__qualname__))
    return {name: "; ".join(f"{value} ({', '.join(dict.fromkeys(owners))})"
                            for value, owners in by_value.items())
            for name, by_value in defaults.items() if len(by_value) > 1}


def _shown(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


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
    """The options of `cls` from the flags given on the command line; every other field
    takes its default, the class's (not the flag's: a flag shared by several tasks shows
    no default of its own). A flag defined here and given on the command line that `cls`
    has no field for is a `UsageError` (`what`: whose options `cls` are)."""
    names = set(cls.names())
    given = sorted({name for name in _DEFINED
                    if name not in names and flags.FLAGS[name].present})
    if given:
        raise UsageError(f"{', '.join('--' + name for name in given)}: not an option of "
                         f"{what or cls.__qualname__}")
    return cls.build({name: value for name, value in flag_values(cls).items()
                      if flags.FLAGS[name].present})
