"""`run_classifier.py`: GLUE tasks and RACE as the original; multiple choice on C3, SWAG
or JSON lines; classification, regression and multi-label classification from your own
CSV / TSV / JSONL files; a task of your own (`--task_module`). Train / eval / predict.

The flags are defined here; the tasks are modules of `albert_tf.tasks`
(`classification`, `multiple_choice`, `multi_label`, or the file given), run by the one
fine-tuning driver (`albert_tf.apps.driver`).
"""

from __future__ import annotations

from absl import flags

from albert_tf.apps import driver
from albert_tf.apps.options import typed_options
from albert_tf.apps.script_flags import (
    MODEL_FLAG_NAMES,
    FlagNames,
    define_fine_tuning_flags,
    define_model_flags,
)
from albert_tf.tasks.classification import ClassificationTask
from albert_tf.tasks.multi_label import MultiLabelTask
from albert_tf.tasks.multiple_choice import MultipleChoiceTask
from albert_tf.tasks.token_classification import TokenClassificationTask

# The tasks whose flags run_classifier.py has (besides a --task_module's): every
# registered task but SQuAD's and pretraining's, which have scripts of their own.
TASKS = (ClassificationTask, MultipleChoiceTask, MultiLabelTask, TokenClassificationTask)


def define_flags():
    define_model_flags(learning_rate=5e-5, optimizer="adamw")
    flags.DEFINE_string("data_dir", None,
                        "The GLUE root (the task adds its folder, e.g. MRPC/), the folder "
                        "holding RACE/, C3's c3-{d,m}-*.json, SWAG's {train,val,test}.csv, "
                        "or {train,dev,test}.jsonl / .csv / .tsv of your own task.")
    flags.DEFINE_string("task_name", None,
                        "A GLUE task (cola, mnli, mismnli, mrpc, rte, sst-2, sts-b, qqp, "
                        "qnli, wnli, ax), race, c3, swag, multiple_choice (JSON lines "
                        "{id, context, question, choices, label}), or classification / "
                        "regression (your CSV, TSV or JSONL files; see --text_a_field), "
                        "multi_label (the same files, several labels per row; see "
                        "--label_separator), ner, cluener or conll (as run_ner.py), or the "
                        "name of a --task_module's task.")
    flags.DEFINE_string("train_file", None,
                        "c3 / swag / multiple_choice / classification / regression: the "
                        "training file (comma-separated for several), instead of "
                        "--data_dir's.")
    flags.DEFINE_string("dev_file", None, "As --train_file, for --do_eval.")
    flags.DEFINE_string("test_file", None, "As --train_file, for --do_predict.")
    flags.DEFINE_string("text_a_field", None,
                        "classification / regression: the text's column name (CSV/TSV "
                        "header, JSON key) or 0-based index.")
    flags.DEFINE_string("text_b_field", None, "The second text's field, for pairs.")
    flags.DEFINE_string("label_field", "label", "The label's field.")
    flags.DEFINE_list("labels", None,
                      "classification: the labels, comma-separated (default: those of the "
                      "training file, sorted, saved as labels.txt in --output_dir).")
    flags.DEFINE_bool("header", True,
                      "CSV / TSV files start with a header row (else fields are indices).")
    flags.DEFINE_string("cached_dir", None,
                        "Where converted TFRecords are cached (default: output_dir).")
    define_fine_tuning_flags(max_seq_length=512, predict_help="Predict the test set.",
                             train_step=1000, warmup_step=0, epochs=False)
    flags.DEFINE_float("dropout_prob", 0.1, "Dropout of the classifier head.")
    for task in TASKS:
        task.define_flags()
    # (a module that cannot be loaded stops the program with one line, `error: ...`)
    driver.define_task_module_flag("the built-in tasks")


# The flags passed to `run`: the model flags, those `define_flags` adds, those the task
# modules define (multiple choice's, the built-in ones') and those of a --task_module.
FLAG_NAMES = MODEL_FLAG_NAMES + FlagNames(
    __name__, *(task.__module__ for task in TASKS)) + driver.TASK_MODULE_FLAG_NAMES


def task_class(options: dict):
    """The `albert_tf.tasks.Task` of the run: `--task_module`'s, or `--task_name`'s
    among `TASKS` (`driver.task_of`)."""
    return driver.task_of(options, named=TASKS)


def run(options: dict) -> dict:
    """Trains, evaluates (keeping the best checkpoint) and predicts; returns the best
    eval results."""
    options = typed_options(options, FLAG_NAMES, exclusive=[("high_only", "middle_only")])
    return driver.run(task_class(options), options)
