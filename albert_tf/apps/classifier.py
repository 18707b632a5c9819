"""`run_classifier.py`: every registered fine-tuning task: GLUE tasks and RACE as the
original; multiple choice on C3, SWAG or JSON lines; classification, regression and
multi-label classification from your own CSV / TSV / JSONL files; NER's data sets and
SQuAD (as run_ner.py and run_squad.py run them, with the same defaults); a task of your
own (`--task_module`). Train / eval / predict.

The flags are the options of the registered tasks (`albert_tf.tasks.fine_tuning()`, or
the file given), each default its task's; the run is the one fine-tuning driver's
(`albert_tf.apps.driver`).
"""

from __future__ import annotations

from albert_tf import tasks
from albert_tf.apps import driver


def define_flags():
    driver.define_task_flags(tasks.fine_tuning(), "the built-in tasks", helps={
        "data_dir": "The GLUE root (the task adds its folder, e.g. MRPC/), the folder "
                    "holding RACE/, C3's c3-{d,m}-*.json, SWAG's {train,val,test}.csv, or "
                    "{train,dev,test}.jsonl / .csv / .tsv of your own task.",
        "task_name": driver.task_name_help()})


def task_class(options):
    """The `albert_tf.tasks.Task` of the run (`driver.task_of`): the task whose options
    `options` are, `--task_module`'s, or the registered task `--task_name` names."""
    return driver.task_of(options)


def options_from_flags():
    """The run's options, from the flags given: its task's `Options`."""
    return driver.options_from_flags()


def run(options) -> dict:
    """Trains, evaluates (keeping the best checkpoint) and predicts; returns the best
    eval results. `options`: a mapping of run_classifier.py's flags, or the options of a
    registered task (`ClassificationTask.Options`, a task file's, ...). The same as
    `driver.run(None, options)`."""
    return driver.run(None, options)
