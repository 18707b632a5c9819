"""`run_ner.py`: token classification (NER) on CoNLL column files or CLUENER JSON lines:
train / eval / predict, the labels kept beside the model, an export that answers raw
text.

The flags are defined here; the task is `albert_tf.tasks.token_classification`, run by
the one fine-tuning driver (`albert_tf.apps.driver`).
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
from albert_tf.tasks.token_classification import TokenClassificationTask


def define_flags():
    define_model_flags(learning_rate=5e-5, optimizer="adamw")
    flags.DEFINE_string("data_dir", None,
                        "Folder of the task's files (with --task_name; see --train_file).")
    flags.DEFINE_string("task_name", None,
                        "cluener (train.json, dev.json, test.json: CLUENER2020 JSON lines) "
                        "or conll (train.txt, dev.txt, test.txt: CoNLL column files).")
    flags.DEFINE_string("train_file", None,
                        "Training file: CoNLL columns (tag last) or CLUENER JSON lines "
                        "(overrides --data_dir).")
    flags.DEFINE_string("dev_file", None, "Dev file for --do_eval (same formats).")
    flags.DEFINE_string("test_file", None,
                        "File for --do_predict; predictions are written back in its own "
                        "format (test_predictions.conll / test_predictions.json).")
    flags.DEFINE_list("labels", None,
                      "The tags, comma-separated (default: those of the training file, "
                      "\"O\" first, saved as labels.txt in --output_dir).")
    flags.DEFINE_string("cached_dir", None,
                        "Where converted TFRecords are cached (default: output_dir).")
    define_fine_tuning_flags(
        max_seq_length=128, predict_help="Predict --test_file.",
        length_help="Window length; longer sentences are split into windows of whole words.")
    flags.DEFINE_float("dropout_prob", 0.1, "Dropout of the tagging head.")
    driver.define_task_module_flag("NER")


FLAG_NAMES = MODEL_FLAG_NAMES + FlagNames(__name__) + driver.TASK_MODULE_FLAG_NAMES


def run(options: dict) -> dict:
    """Trains, evaluates every kept checkpoint on the dev file (keeping the best),
    predicts the test file; returns the best dev scores."""
    options = typed_options(options, FLAG_NAMES)
    return driver.run(driver.task_of(options, default=TokenClassificationTask), options)
