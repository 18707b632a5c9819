"""Fine-tuning tasks as modules: the task API (`Task`), the tasks written with it, and
the loading of a task from a file of your own (`--task_module=path/to/my_task.py`).

A task module defines a `Task` subclass and names it `TASK`; see `albert_tf.tasks.base`
for what a task says and `albert_tf.apps.driver` for what is done with it. The modules
here: `classification` (GLUE, your files), `multiple_choice` (RACE, C3, SWAG, JSON
lines), `token_classification` (NER), `squad`, and `multi_label`, which `BUILTIN` names
for `run_classifier.py --task_name` (the others are picked by their scripts); and
`pretraining` (MLM + SOP), which `run_pretraining.py` runs with its own short flow.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from typing import Sequence

from albert_tf.data.errors import DataError
from albert_tf.tasks.base import Task

# --task_name -> the module of a task written with this API.
BUILTIN = {"multi_label": "albert_tf.tasks.multi_label"}
TASK_MODULE_FLAG = "task_module"
METRIC_GOALS = ("max", "min")


class TaskModuleError(ValueError):
    """A --task_module that cannot be loaded, or that defines no task."""


def _task_of(module, where: str) -> type[Task]:
    task = getattr(module, "TASK", None)
    if task is None:
        raise TaskModuleError(f"{where} defines no TASK: it must name its "
                              "albert_tf.tasks.Task subclass TASK (TASK = MyTask)")
    if not (isinstance(task, type) and issubclass(task, Task)):
        raise TaskModuleError(f"{where} must name its albert_tf.tasks.Task subclass TASK "
                              f"(TASK = MyTask); its TASK = {_short(repr(task))} is not "
                              "a Task subclass")
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
    return task


def builtin(name: str | None) -> type[Task] | None:
    """The built-in task of `--task_name`, if it is one."""
    module = BUILTIN.get((name or "").lower())
    return None if module is None else _task_of(importlib.import_module(module), module)


def import_builtin() -> list[type[Task]]:
    """The built-in tasks, their modules imported (which registers their serving
    kinds)."""
    return [builtin(name) for name in BUILTIN]


_loaded: dict[str, type[Task]] = {}


def _short(text: str, limit: int = 300) -> str:
    """`text` on one line (its lines joined), at most `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _failed(what: str, error: Exception, module_name: str) -> TaskModuleError:
    """The one-line error for an exception that a task module raised while it ran
    (`what`: while imported, or its `TASK.define_flags()`): its type and message, and
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
    """The task of a Python file (or an importable module name): imported once as a
    module of its own, whose `TASK.define_flags()` then defines the task's flags. A
    `TaskModuleError` when it cannot: a path that is not a file, a module that cannot
    be found, a syntax error or an exception while it is imported or defines its flags
    (its type, message and the line of the module that raised it), no `Task` subclass
    named TASK: one line each."""
    path = os.fspath(path)
    if path in _loaded:
        return _loaded[path]
    where = f"--{TASK_MODULE_FLAG}={path}"
    if path.endswith(".py") or os.sep in path:
        if not os.path.exists(path):
            raise TaskModuleError(f"{where} does not exist")
        if not os.path.isfile(path):
            raise TaskModuleError(f"{where} is not a file")
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
    task = _task_of(module, where)
    try:
        task.define_flags()
    except Exception as e:
        raise _failed(f"{where}: {task.__name__}.define_flags() failed", e,
                      module.__name__) from None
    _loaded[path] = task
    return task


def load_task_module_in(argv: Sequence[str]) -> type[Task] | None:
    """The task of the `--task_module` among command-line arguments (`task_module_in`),
    loaded while a script defines its flags, before absl parses them, so that the
    task's flags exist by then (None without one). That is before a script reports
    errors as one line: a module that cannot be loaded stops the program here with its
    one line, `error: <why>`, exit status 1, as the scripts' other bad input."""
    given = task_module_in(argv)
    if not given:
        return None
    try:
        return load_task_module(given)
    except TaskModuleError as e:
        raise SystemExit(f"error: {e}") from None


def loaded_modules() -> list[str]:
    """The module names of the task files loaded so far (their flags are theirs)."""
    return [task.__module__ for task in _loaded.values()]


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


__all__ = ["BUILTIN", "DataError", "Task", "TaskModuleError", "builtin", "import_builtin",
           "load_task_module", "load_task_module_in", "loaded_modules",
           "task_module_in"]
