"""Your own task in one file (`--task_module`, `albert_tf.tasks`): what a task module must
be, its one-line errors at every door, and how --task_name and --task_module pick the
task. (A task of one's own run through every door: tests/test_task_registration.py;
the README's example, examples/mean_pool_classifier.py: tests/test_readme_sections.py.)"""

import re

import pytest

from albert_tf import tasks
from albert_tf.apps import classifier
from albert_tf.apps.runner import user_errors
from albert_tf.errors import UsageError
from tests.helpers.forked import run_installed, run_python
from tests.helpers.scripts import ROOT, one_line_error, run_script

EXAMPLE = ROOT / "examples" / "mean_pool_classifier.py"


def test_a_task_module_must_register_one_task(tmp_path):
    (tmp_path / "none.py").write_text("X = 1\n")
    with pytest.raises(tasks.TaskModuleError, match="registers no task: decorate its "
                                                    "albert_tf.tasks.Task subclass with "
                                                    "@albert_tf.tasks.register$"):
        tasks.load_task_module(tmp_path / "none.py")
    (tmp_path / "old.py").write_text("from albert_tf import tasks\nclass T(tasks.Task):\n"
                                     "    name = 'old'\nTASK = T\n")
    with pytest.raises(tasks.TaskModuleError, match=r"registers no task: .*\(a TASK = \.\.\. "
                                                    "name is not read: decorate the class"):
        tasks.load_task_module(tmp_path / "old.py")
    (tmp_path / "nameless.py").write_text(
        "from albert_tf import tasks\n@tasks.register\nclass T(tasks.Task):\n"
        "    metric = 'f1'\n")
    with pytest.raises(tasks.TaskModuleError, match="T.name must be a non-empty name"):
        tasks.load_task_module(tmp_path / "nameless.py")
    (tmp_path / "two.py").write_text(
        "from albert_tf import tasks\nfrom albert_tf.tasks.classification import "
        "ClassificationTask as C\n"
        "@tasks.register\nclass A(C):\n    name = 'two_a'\n"
        "@tasks.register\nclass B(C):\n    name = 'two_b'\n")
    with pytest.raises(tasks.TaskModuleError, match=r"registers 2 tasks \(two_a, two_b\); "
                                                    "a task module registers one"):
        tasks.load_task_module(tmp_path / "two.py")
    # Its options: a frozen dataclass of the task API's options.
    (tmp_path / "undecorated.py").write_text(
        "from albert_tf import tasks\n@tasks.register\nclass T(tasks.Task):\n"
        "    name, metric = 'undecorated', 'f1'\n"
        "    class Options(tasks.Task.Options):\n        key: str = tasks.option('k')\n")
    with pytest.raises(tasks.TaskModuleError, match=re.escape(
            "T.Options with @dataclasses.dataclass(frozen=True) (it declares key)")):
        tasks.load_task_module(tmp_path / "undecorated.py")
    (tmp_path / "plain.py").write_text(
        "import dataclasses\nfrom albert_tf import tasks\n@tasks.register\n"
        "class T(tasks.Task):\n    name, metric = 'plain', 'f1'\n"
        "    @dataclasses.dataclass(frozen=True)\n    class Options:\n        key: str = 'k'\n")
    with pytest.raises(tasks.TaskModuleError, match="T.Options must derive from "
                                                    "albert_tf.tasks.Task.Options"):
        tasks.load_task_module(tmp_path / "plain.py")
    with pytest.raises(tasks.TaskModuleError, match="missing.py does not exist"):
        tasks.load_task_module(tmp_path / "missing.py")
    (tmp_path / "folder.py").mkdir()
    with pytest.raises(tasks.TaskModuleError, match="folder.py is not a file"):
        tasks.load_task_module(tmp_path / "folder.py")
    assert issubclass(tasks.TaskModuleError, user_errors())


def broken_task_modules(folder) -> dict[str, str]:
    """--task_module values that cannot be loaded (files written in `folder`), each with
    a regular expression of the one line that refuses it."""
    def write(name, text):
        (folder / name).write_text(text)
        return str(folder / name)

    syntax = write("syntax.py", '"""A task."""\n\nreturn TASK\n')
    raises = write("raises.py", 'def check():\n    raise RuntimeError("no rows in data/")\n'
                                '\n\ncheck()\n')
    deep = write("deep.py", 'import json\n\nSETTINGS = json.loads("{")\n')
    no_task = write("no_task.py", "from albert_tf import tasks\n\n\nclass MyTask("
                                  "tasks.Task):\n    name = 'mine'\n")
    not_a_task = write("not_a_task.py", "from albert_tf import tasks\n\n"
                                        "tasks.register('classification')\n")
    missing = str(folder / "missing.py")
    must = ("registers no task: decorate its albert_tf.tasks.Task subclass with "
            "@albert_tf.tasks.register")
    lines = {
        syntax: f"failed while imported: SyntaxError: 'return' outside function (at "
                f"{syntax}:3)",
        raises: f"failed while imported: RuntimeError: no rows in data/ (at {raises}:2)",
        no_task: must,

        missing: "does not exist",
        "no_such_task_module": "is not a file, and no module of that name can be imported: "
                               "No module named 'no_such_task_module'"}
    expected = {given: re.escape(f"error: --task_module={given} {line}")
                for given, line in lines.items()}
    # Raised in a library: the line of the task's file that called it, then where.
    expected[deep] = re.escape(
        f"error: --task_module={deep} failed while imported: JSONDecodeError: Expecting "
        f"property name enclosed in double quotes: line 1 column 2 (char 1) (at {deep}:3, "
        "raised in ") + r"\S+/json/decoder\.py:\d+\)"
    expected[not_a_task] = re.escape(
        f"error: --task_module={not_a_task} failed while imported: TaskModuleError: "
        "albert_tf.tasks.register takes an albert_tf.tasks.Task subclass, got "
        f"'classification' (at {not_a_task}:3, raised in ") + \
        r"\S+/albert_tf/tasks/__init__\.py:\d+\)"
    return expected


def test_a_task_module_that_cannot_be_loaded_is_one_line_at_every_door(tmp_path):
    """run_classifier.py and `python -m albert_tf.convert` load the --task_module before
    absl parses the flags (its flags, its model): outside the scripts' own handling of
    bad input, each failure is still one line, once, exit status 1."""
    out = tmp_path / "out"
    for given, expected in broken_task_modules(tmp_path).items():
        for result in (
                run_script("run_classifier.py", f"--task_module={given}", "--do_train",
                           f"--output_dir={out}", check=False),
                run_python(["-m", "albert_tf.convert", f"--task_module={given}",
                            f"--input={tmp_path}", f"--output={out}"], cwd=tmp_path)):
            assert re.fullmatch(expected, one_line_error(result)), (given, result.stderr)
    # The installed command too (it imports the same script module), and every other
    # door that takes a --task_module.
    line = (f"error: --task_module={tmp_path / 'raises.py'} failed while imported: "
            f"RuntimeError: no rows in data/ (at {tmp_path / 'raises.py'}:2)")
    installed = run_installed("albert-run-classifier", [
        f"--task_module={tmp_path / 'raises.py'}", f"--output_dir={out}"])
    assert one_line_error(installed) == line
    for script in ("run_ner.py", "run_squad.py", "export_savedmodel.py"):
        result = run_script(script, f"--task_module={tmp_path / 'raises.py'}",
                            f"--output_dir={out}", check=False)
        assert one_line_error(result) == line, script
    assert not out.exists()


def test_the_task_module_is_found_before_absl_parses_flags():
    assert tasks.task_module_in(["--do_train", "--task_module=a/b.py"]) == "a/b.py"
    assert tasks.task_module_in(["--task_module", "b.py", "--x=1"]) == "b.py"
    assert tasks.task_module_in(["--task_modules=b.py"]) is None


def test_task_name_and_task_module_must_agree():
    with pytest.raises(UsageError, match="--task_name=other, but --task_module=.* "
                                         "is the task 'mean_pool'"):
        classifier.task_class({"task_module": str(EXAMPLE), "task_name": "other"})
    assert classifier.task_class({"task_name": "MRPC"}).__name__ == "ClassificationTask"
    assert classifier.task_class({"task_name": "multi_label"}).name == "multi_label"
    # --task_name names a task or a data set it runs, in every script.
    assert classifier.task_class({"task_name": "cluener"}).name == "ner"
    assert classifier.task_class({"task_name": "squad"}).name == "squad"
    # Pretraining reads streams, not splits: run_pretraining.py runs it.
    with pytest.raises(UsageError, match="--task_name=pretraining: no such task here; "
                                         "expected one of .*cola.*squad.*, or give "
                                         "--task_module"):
        classifier.task_class({"task_name": "pretraining"})


def test_every_tasks_data_error_is_one_kind_the_scripts_report():
    from albert_tf.data.glue import GlueDataError
    from albert_tf.data.multiple_choice import ChoiceDataError
    from albert_tf.data.ner import NerDataError
    from albert_tf.data.pretraining import PretrainingDataError
    from albert_tf.data.squad import SquadError
    from albert_tf.data.tabular import TableDataError

    for error in (GlueDataError, ChoiceDataError, NerDataError, PretrainingDataError,
                  SquadError, TableDataError):
        assert issubclass(error, tasks.DataError)
    assert issubclass(tasks.DataError, user_errors())
