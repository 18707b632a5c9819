"""Fine-tuning tasks as modules: the task API (`Task`), the tasks written with it, their
one registry, and the loading of a task from a file of your own
(`--task_module=path/to/my_task.py`).

A task is a `Task` subclass registered once, with `@register`: it names its serving
kinds (`Task.serving_kinds`), each of which names its model, and the model holds its
heads (`albert_tf.task_heads.Head`). Everything that needs a task, a model, a head or a
serving kind by name reads it from here: the scripts' `--task_name` (`find`), `convert`'s
`--kind` (`models`), `export_savedmodel.py`'s `--kind` (`serving_kinds`). The modules
here register theirs exactly as a file of yours does: `classification` (GLUE, your
files), `multiple_choice` (RACE, C3, SWAG, JSON lines), `token_classification` (NER),
`squad`, `multi_label` and `pretraining` (MLM + SOP, which `run_pretraining.py` runs
with its own short flow). See `albert_tf.tasks.base` for what a task says and
`albert_tf.apps.driver` for what is done with it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
import sys
from typing import Sequence

from albert_tf.data.errors import DataError
from albert_tf.errors import UserError
from albert_tf.tasks.base import Task
from albert_tf.tasks.options import option

TASK_MODULE_FLAG = "task_module"
METRIC_GOALS = ("max", "min")

# Every registered task by its name: the package's and those of the files loaded.
_TASKS: dict[str, type[Task]] = {}


class TaskModuleError(UserError):
    """A --task_module that cannot be loaded, or that defines no task."""


def _checked(task) -> type[Task]:
    """`task` if it is a Task subclass that says what the driver needs; else a
    `TaskModuleError` naming the file that defines it."""
    if not (isinstance(task, type) and issubclass(task, Task)):
        raise TaskModuleError(f"albert_tf.tasks.register takes an albert_tf.tasks.Task "
                              f"subclass, got {_short(repr(task))}")
    where = _file_of(task)
    if not task.name or not re.fullmatch(r"[A-Za-z0-9_.-]+", task.name):
        raise TaskModuleError(f"{where}: {task.__name__}.name must be a non-empty name of "
                              f"letters, digits, '_', '-' or '.', got {task.name!r}")
    if not task.metric:
        raise TaskModuleError(f"{where}: {task.__name__}.metric must name the dev result "
                              "that picks the best checkpoint")
    if task.metric_goal not in METRIC_GOALS:
        raise TaskModuleError(f"{where}: {task.__name__}.metric_goal must be "
                              f"{' or '.join(map(repr, METRIC_GOALS))} (which way "
                              f"{task.metric!r} is better), got {task.metric_goal!r}")
    _check_options(task, where)
    _check_moved(task, where)
    from albert_tf.export.kinds import ServingKind

    kinds = task.serving_kinds
    if not (isinstance(kinds, tuple) and kinds and
            all(isinstance(kind, ServingKind) for kind in kinds)):
        raise TaskModuleError(f"{where}: {task.__name__}.serving_kinds must be a tuple of "
                              "one or more albert_tf.export.ServingKind (the first is "
                              f"the run's by default), got {_short(repr(kinds))}")
    return task


def _check_options(task, where: str) -> None:
    """`task.Options`: a frozen dataclass deriving from `RunOptions` (`Task.Options`,
    or pretraining's) whose every annotated name is its dataclass's (a field or a
    ClassVar)."""
    from albert_tf.tasks.options import RunOptions

    options = task.Options
    if not (isinstance(options, type) and issubclass(options, RunOptions)):
        raise TaskModuleError(f"{where}: {task.__name__}.Options must derive from "
                              f"albert_tf.tasks.Task.Options, got {_short(repr(options))}")
    own = vars(options).get("__annotations__", {})
    # (an undecorated class sees its base's table, which lacks its own names)
    missing = [name for name in own if name not in options.__dataclass_fields__]
    if missing or not vars(options).get("__dataclass_params__") or \
            not options.__dataclass_params__.frozen:
        declared = f" (it declares {', '.join(missing)})" if missing else ""
        raise TaskModuleError(f"{where}: decorate {task.__name__}.Options with "
                              f"@dataclasses.dataclass(frozen=True){declared}")


# What a task once said itself and now says through its collaborators: a task file
# that still defines one of these is refused, naming where it goes (else the driver
# would never call it).
_MOVED = {
    **dict.fromkeys((
        "data_files", "head", "discover_labels", "split_records", "record_spec",
        "cache_settings", "cached_records", "write_records", "dataset", "records_name",
        "cache_info", "pack", "train_steps", "has_labels", "eval_outputs",
        "predict_outputs", "label_features", "sequence_features", "padding_values",
        "cache_format"), "a member of its Data class: class Data(Task.Data)"),
    **dict.fromkeys((
        "distillation", "transfer_is_pair", "read_transfer", "write_transfer_records",
        "pseudo_label"), "a member of its Teaching class: class Teaching(Task.Teaching) "
        "(distillation's output and soft loss: `output`, `soft_loss`)"),
    "task_names": "its Data class's `data_sets` (the names besides `name`)",
    "answers": "its Data class's `data_sets` (the names besides `name`)",
    "validate": "a method of its Options class (`validate(self)`, calling its base's)",
    "evaluated": "`prepare_model(model, output_dir, best)`, which gets the best results",
    "results": "what `write_predictions` returns (a dict of results)",
}


def _check_moved(task, where: str) -> None:
    """`task` defines none of `_MOVED`'s names, and its collaborators are the base's
    kinds."""
    from albert_tf.tasks.data import TaskData
    from albert_tf.tasks.teaching import TaskTeaching

    for klass in task.__mro__:
        if klass is Task:
            break
        for name in vars(klass):
            if name in _MOVED:
                raise TaskModuleError(f"{where}: {klass.__name__}.{name} is now "
                                      f"{_MOVED[name]}")
    for attribute, base in (("Data", TaskData), ("Teaching", TaskTeaching)):
        value = getattr(task, attribute)
        if not (isinstance(value, type) and issubclass(value, base)):
            raise TaskModuleError(f"{where}: {task.__name__}.{attribute} must derive from "
                                  f"albert_tf.tasks.Task.{attribute}, got "
                                  f"{_short(repr(value))}")


def _file_of(task) -> str:
    """The file that defines `task` (else its module's name)."""
    return getattr(sys.modules.get(task.__module__), "__file__", None) or task.__module__


def _place(task) -> str:
    return f"{task.__qualname__} ({_file_of(task)})"


def register(task: type[Task]) -> type[Task]:
    """A class decorator, a task's one registration: adds the `Task` subclass to the
    registry under its `name`, with its serving kinds, their models and heads. The same
    class again (a module loaded twice) replaces it; another task under a known name,
    or a serving kind whose name another task's kind has, is refused."""
    task = _checked(task)
    known = _TASKS.get(task.name)
    if known is not None and not _same(known, task):
        raise TaskModuleError(f"{_place(task)}: a task named {task.name!r} is already "
                              f"registered: {_place(known)}")
    for kind in task.serving_kinds:
        other = _kinds_of(exclude=task.name).get(kind.name)
        if other is not None and other is not kind:
            raise TaskModuleError(f"{_place(task)}: its serving kind {kind.name!r} has the "
                                  "name of another task's kind")
    _TASKS[task.name] = task
    return task


def _same(a: type, b: type) -> bool:
    """Whether two classes are one class's definition: the same name in the same module,
    or in the same file (a task file imported by its name and again as --task_module)."""
    if a.__qualname__ != b.__qualname__:
        return False
    return a.__module__ == b.__module__ or _realpath(_file_of(a)) == _realpath(_file_of(b))


def _realpath(path: str) -> str:
    return os.path.realpath(path) if os.path.isfile(path) else path


_BUILTINS_IMPORTED = False


def registered() -> dict[str, type[Task]]:
    """Every registered task by name. The package's own are those its modules register:
    every module of `albert_tf.tasks` is imported the first time (no list of them is
    kept beside the registry)."""
    global _BUILTINS_IMPORTED
    if not _BUILTINS_IMPORTED:
        for module in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
            importlib.import_module(module.name)
        _BUILTINS_IMPORTED = True
    return dict(_TASKS)


def fine_tuning() -> tuple[type[Task], ...]:
    """The registered tasks that the fine-tuning driver runs (`albert_tf.apps.driver`):
    those whose options are `FineTuningOptions` (not pretraining, which reads streams,
    not splits, and has a short flow of its own), the package's first."""
    from albert_tf.tasks.options import FineTuningOptions

    return tuple(task for task in registered().values()
                 if issubclass(task.Options, FineTuningOptions))


def owning(options) -> type[Task] | None:
    """The registered task whose `Options` class `options` are an instance of."""
    for task in registered().values():
        if type(options) is task.Options:
            return task
    return None


def model_classes() -> dict[str, type]:
    """Every task model class by its class name (`albert_tf.AlbertClassifier`, ...): the
    models of the registered tasks' serving kinds."""
    return {kind.model_class.__name__: kind.model_class
            for task in registered().values() for kind in task.serving_kinds
            if kind.model_class is not None}


def task_names(task: type[Task]) -> tuple[str, ...]:
    """The `--task_name`s that pick `task`: its `name` and its `Data.data_sets`."""
    return tuple(dict.fromkeys((task.name, *task.Data.data_sets)))


def answers(task: type[Task], task_name: str) -> bool:
    """Whether `--task_name=task_name` picks `task`: one of its `task_names`, in any
    case."""
    return task_name.strip().lower() in {name.lower() for name in task_names(task)}


def find(task_name: str | None) -> type[Task] | None:
    """The registered task that answers `task_name` (`answers`: its name, or one of the
    names of the data sets it runs, such as a GLUE task's), or None."""
    if not task_name:
        return None
    for task in registered().values():
        if answers(task, task_name):
            return task
    return None


def _kinds_of(exclude: str | None = None) -> dict:
    from albert_tf.export.kinds import ENCODER

    found = {ENCODER.name: ENCODER}
    for name, task in _TASKS.items():
        if name != exclude:
            for kind in task.serving_kinds:
                found.setdefault(kind.name, kind)
    return found


def serving_kinds() -> dict:
    """Every serving kind by name (`albert_tf.export.ServingKind`): the encoder's, which
    any model's weights fill, and those of the registered tasks."""
    registered()
    return _kinds_of()


def models() -> dict[str, type]:
    """Every model by the name of its serving kind (`convert --kind`): the encoder and
    the models of the registered tasks."""
    return {name: kind.model_class for name, kind in serving_kinds().items()}


_loaded: dict[str, type[Task]] = {}


def _short(text: str, limit: int = 300) -> str:
    """`text` on one line (its lines joined), at most `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _failed(what: str, error: Exception, module_name: str) -> TaskModuleError:
    """The one-line error for an exception that a task module raised while it ran
    (`what`: while imported): its type and message, and
    where: the line of the module (`module_name`) that raised it or called what did,
    and the innermost place if that is elsewhere; a syntax error, its file and line."""
    mine = innermost = None
    frame = error.__traceback__
    while frame is not None:
        place = f"{frame.tb_frame.f_code.co_filename}:{frame.tb_lineno}"
        if frame.tb_frame.f_globals.get("__name__") == module_name:
            mine = place
        innermost = place
        frame = frame.tb_next
    if isinstance(error, SyntaxError):  # (compiling: no frame of its file)
        message = error.msg
        places = [f"{error.filename}:{error.lineno}" if error.filename else None, mine]
        join = ", imported at "
    else:
        message = str(error)
        places = [mine, innermost]
        join = ", raised in "
    places = list(dict.fromkeys(p for p in places if p))
    where = f" (at {join.join(places)})" if places else ""
    kind = type(error).__name__
    message = _short(message)
    return TaskModuleError(f"{what}: {kind}{': ' + message if message else ''}{where}")


def load_task_module(path) -> type[Task]:
    """The task that a Python file (or an importable module name) registers: imported
    once as a module of its own. A `TaskModuleError` when it cannot: a path that is not
    a file, a module that cannot be found, a syntax error or an exception while it is
    imported (its type, message and the line of the module that raised it), a module
    that registers no task, or more than one: one line each."""
    path = os.fspath(path)
    if path in _loaded:
        return _loaded[path]
    where = f"--{TASK_MODULE_FLAG}={path}"
    if path.endswith(".py") or os.sep in path:
        if not os.path.exists(path):
            raise TaskModuleError(f"{where} does not exist")
        if not os.path.isfile(path):
            raise TaskModuleError(f"{where} is not a file")
        imported = _module_of_file(path)
        if imported is not None:  # (imported by its name already: the same task)
            task = _registered_by(imported, where)
            _loaded[path] = task
            return task
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        name = f"albert_tf_user_task_{stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            del sys.modules[name]
            raise _failed(f"{where} failed while imported", e, name) from None
    else:
        try:
            module = importlib.import_module(path)
        except ModuleNotFoundError as e:
            if e.name is None or not (path == e.name or path.startswith(e.name + ".")):
                raise _failed(f"{where} failed while imported", e, path) from None
            raise TaskModuleError(f"{where} is not a file, and no module of that name can "
                                  f"be imported: {e}") from None
        except Exception as e:
            raise _failed(f"{where} failed while imported", e, path) from None
    task = _registered_by(module, where)
    _loaded[path] = task
    return task


def _module_of_file(path: str):
    """The module already imported from the file `path`, or None."""
    wanted = os.path.realpath(path)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and os.path.realpath(file) == wanted:
            return module
    return None


def _registered_by(module, where: str) -> type[Task]:
    """The one task that `module` registered."""
    found = [task for task in _TASKS.values() if task.__module__ == module.__name__]
    if len(found) > 1:
        raise TaskModuleError(f"{where} registers {len(found)} tasks "
                              f"({', '.join(task.name for task in found)}); a task "
                              "module registers one")
    if not found:
        hint = " (a TASK = ... name is not read: decorate the class instead)" \
            if hasattr(module, "TASK") else ""
        raise TaskModuleError(f"{where} registers no task: decorate its "
                              f"albert_tf.tasks.Task subclass with @albert_tf.tasks.register"
                              f"{hint}")
    return found[0]


def load_task_module_in(argv: Sequence[str]) -> type[Task] | None:
    """The task of the `--task_module` among command-line arguments (`task_module_in`),
    loaded while a script defines its flags, before absl parses them, so that the
    task's options are flags by then (None without one). That is before a script reports
    errors as one line: a module that cannot be loaded stops the program here with its
    one line, `error: <why>`, exit status 1, as the scripts' other bad input."""
    given = task_module_in(argv)
    if not given:
        return None
    try:
        return load_task_module(given)
    except TaskModuleError as e:
        raise SystemExit(f"error: {e}") from None


def task_module_in(argv: Sequence[str]) -> str | None:
    """The value of `--task_module` among command-line arguments (absl's spellings:
    `--task_module=X`, `--task_module X`), read before absl parses them so that the
    task's flags exist by then."""
    flag = f"--{TASK_MODULE_FLAG}"
    for i, arg in enumerate(argv):
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
    return None


__all__ = ["DataError", "Task", "TaskModuleError", "answers", "find", "fine_tuning", "option",
           "load_task_module", "load_task_module_in", "model_classes", "models", "owning",
           "register", "registered", "serving_kinds", "task_module_in", "task_names"]
