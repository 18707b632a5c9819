"""`run_classifier.py`: GLUE tasks and RACE as the original; multiple choice on C3, SWAG
or JSON lines; classification, regression and multi-label classification from your own
CSV / TSV / JSONL files; NER's data sets and SQuAD (as run_ner.py and run_squad.py run
them, with this script's defaults); a task of your own (`--task_module`). Train / eval /
predict.

The flags are the options of the tasks (`albert_tf.tasks.classification`,
`multiple_choice`, `multi_label`, `token_classification`, `squad`, or the file given),
made flags here with the original script's defaults; the run is the one fine-tuning
driver's (`albert_tf.apps.driver`).
"""

from __future__ import annotations

from albert_tf.apps import driver
from albert_tf.apps.options import define_flags as define_option_flags
from albert_tf.tasks.classification import ClassificationTask
from albert_tf.tasks.multi_label import MultiLabelTask
from albert_tf.tasks.multiple_choice import MultipleChoiceTask
from albert_tf.tasks.squad import SquadTask
from albert_tf.tasks.token_classification import TokenClassificationTask

# The tasks whose flags run_classifier.py has (besides a --task_module's): every
# registered fine-tuning task. (Pretraining reads streams, not splits: run_pretraining.py
# runs it with its own short flow.)
TASKS = (ClassificationTask, MultipleChoiceTask, MultiLabelTask, TokenClassificationTask,
         SquadTask)


def define_flags():
    # The original has --train_step and --warmup_step (classification's defaults),
    # not the epochs of run_squad.py.
    define_option_flags(*(task.Options for task in TASKS),
                        omit=("num_train_epochs", "warmup_proportion"), helps={
        "data_dir": "The GLUE root (the task adds its folder, e.g. MRPC/), the folder "
                    "holding RACE/, C3's c3-{d,m}-*.json, SWAG's {train,val,test}.csv, or "
                    "{train,dev,test}.jsonl / .csv / .tsv of your own task.",
        "task_name": "A GLUE task (cola, mnli, mismnli, mrpc, rte, sst-2, sts-b, qqp, "
                     "qnli, wnli, ax), race, c3, swag, multiple_choice (JSON lines {id, "
                     "context, question, choices, label}), or classification / "
                     "regression (your CSV, TSV or JSONL files; see --text_a_field), "
                     "multi_label (the same files, several labels per row; see "
                     "--label_separator), ner, cluener or conll (as run_ner.py), squad "
                     "(as run_squad.py), or the name of a --task_module's task.",
        "train_file": "c3 / swag / multiple_choice / classification / regression / "
                      "multi_label / ner / squad: the training file (comma-separated for "
                      "several), instead of --data_dir's.",
        "labels": "classification / multi_label / ner: the labels, comma-separated "
                  "(default: those of the training file, sorted, saved as labels.txt in "
                  "--output_dir).",
        "dropout_prob": "Dropout of the task's head."})
    # (a module that cannot be loaded stops the program with one line, `error: ...`)
    driver.define_task_module_flag("the built-in tasks")


def task_class(options):
    """The `albert_tf.tasks.Task` of the run: `--task_module`'s, or `--task_name`'s
    among `TASKS` (`driver.task_of`)."""
    return driver.task_of(options, named=TASKS)


def options_from_flags():
    """The run's options, from the parsed flags: its task's `Options`."""
    return driver.options_from_flags(named=TASKS)


def run(options) -> dict:
    """Trains, evaluates (keeping the best checkpoint) and predicts; returns the best
    eval results. `options`: a mapping of run_classifier.py's flags, or the options of a
    task (`ClassificationTask.Options`, ...)."""
    return driver.run(task_class(options), options)
