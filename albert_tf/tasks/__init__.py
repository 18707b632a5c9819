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


class TaskModuleError(ValueError):
    """A --task_module that cannot be loaded, or that defines no task."""


def _task_of(module, where: str) -> type[Task]:
    task = getattr(module, "TASK", None)
    if not (isinstance(task, type) and issubclass(task, Task)):
        raise TaskModuleError(f"{where} must name its albert_tf.tasks.Task subclass TASK "
                              f"(TASK = MyTask); it has TASK = {task!r}")
    if not task.name or not re.fullmatch(r"[A-Za-z0-9_.-]+", task.name):
        raise TaskModuleError(f"{where}: {task.__name__}.name must be a non-empty name of "
                              f"letters, digits, '_', '-' or '.', got {task.name!r}")
    if not task.metric:
        raise TaskModuleError(f"{where}: {task.__name__}.metric must name the dev result "
                              "that picks the best checkpoint")
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


def load_task_module(path) -> type[Task]:
    """The task of a Python file (or an importable module name): imported once as a
    module of its own, whose `TASK.define_flags()` then defines the task's flags."""
    path = os.fspath(path)
    if path in _loaded:
        return _loaded[path]
    if path.endswith(".py") or os.sep in path:
        if not os.path.isfile(path):
            raise TaskModuleError(f"--{TASK_MODULE_FLAG}={path} is not a file")
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        name = f"albert_tf_user_task_{stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception:
            del sys.modules[name]
            raise
    else:
        try:
            module = importlib.import_module(path)
        except ImportError as e:
            raise TaskModuleError(f"--{TASK_MODULE_FLAG}={path}: {e}") from None
    task = _task_of(module, path)
    task.define_flags()
    _loaded[path] = task
    return task


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
           "load_task_module", "loaded_modules", "task_module_in"]
